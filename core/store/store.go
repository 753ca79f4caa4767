// Package store owns baremesh's config stores: the ConfigStore read and
// watch interfaces, an in-memory store for state baremesh writes itself,
// and the Aggregate that merges every source into one view with a fixed
// precedence.
//
// It imports only core/config.
package store

import "github.com/baremesh/baremesh/core/config"

// Reader reads configs. Implementations are safe for concurrent use. The
// returned Configs are shared: callers must not alter them.
type Reader interface {
	// Get returns the config of kind/namespace/name.
	Get(kind config.Kind, namespace, name string) (config.Config, bool)
	// List returns every config of kind in namespace ("" for all
	// namespaces), sorted by namespace then name.
	List(kind config.Kind, namespace string) []config.Config
}

// EventType says what happened to a config.
type EventType int

// Event types.
const (
	EventAdd EventType = iota + 1
	EventUpdate
	EventDelete
)

func (t EventType) String() string {
	switch t {
	case EventAdd:
		return "add"
	case EventUpdate:
		return "update"
	case EventDelete:
		return "delete"
	}
	return "unknown"
}

// Event is one change. Old is set for update and delete, New for add and
// update.
type Event struct {
	Type EventType
	Old  *config.Config
	New  *config.Config
}

// Key returns the key of the config the event is about.
func (e Event) Key() config.Key {
	if e.New != nil {
		return e.New.Key()
	}
	return e.Old.Key()
}

// Handler receives a batch of events that happened together (one file,
// one upstream push). It is called from one goroutine at a time, in
// order, and must not block for long or call back into the store's write
// methods.
type Handler func(events []Event)

// Watcher lets a caller follow changes.
type Watcher interface {
	// Subscribe registers h for every later change. Events whose content
	// did not change (config.SameContent) are never delivered.
	Subscribe(h Handler)
}

// ConfigStore reads and watches.
type ConfigStore interface {
	Reader
	Watcher
}
