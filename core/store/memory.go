package store

import (
	"slices"
	"strings"
	"sync"

	"github.com/baremesh/baremesh/core/config"
)

// Memory is an in-memory ConfigStore, for state baremesh writes itself
// (auto-registered WorkloadEntries) and for tests. Safe for concurrent
// use; handlers run synchronously in the writer's goroutine, under a lock
// that keeps their order.
type Memory struct {
	mu       sync.RWMutex
	byKind   map[config.Kind]map[nsName]config.Config
	handlers []Handler
	notifyMu sync.Mutex
}

type nsName struct{ ns, name string }

var _ ConfigStore = (*Memory)(nil)

// NewMemory returns an empty store.
func NewMemory() *Memory {
	return &Memory{byKind: map[config.Kind]map[nsName]config.Config{}}
}

// Get implements Reader.
func (m *Memory) Get(kind config.Kind, namespace, name string) (config.Config, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	c, ok := m.byKind[kind][nsName{namespace, name}]
	return c, ok
}

// List implements Reader.
func (m *Memory) List(kind config.Kind, namespace string) []config.Config {
	m.mu.RLock()
	out := make([]config.Config, 0, len(m.byKind[kind]))
	for k, c := range m.byKind[kind] {
		if namespace == "" || k.ns == namespace {
			out = append(out, c)
		}
	}
	m.mu.RUnlock()
	SortConfigs(out)
	return out
}

// Subscribe implements Watcher.
func (m *Memory) Subscribe(h Handler) {
	m.notifyMu.Lock()
	defer m.notifyMu.Unlock()
	m.handlers = append(m.handlers, h)
}

// Apply adds or replaces configs and deletes keys, as one batch: the
// handlers see one call with every event that changed content.
func (m *Memory) Apply(upserts []config.Config, deletes []config.Key) {
	m.notifyMu.Lock()
	defer m.notifyMu.Unlock()
	m.mu.Lock()
	var events []Event
	for i := range upserts {
		c := upserts[i]
		k := c.Key()
		kind := m.byKind[k.Kind]
		if kind == nil {
			kind = map[nsName]config.Config{}
			m.byKind[k.Kind] = kind
		}
		old, had := kind[nsName{k.Namespace, k.Name}]
		kind[nsName{k.Namespace, k.Name}] = c
		switch {
		case !had:
			events = append(events, Event{Type: EventAdd, New: &c})
		case !config.SameContent(&old, &c):
			events = append(events, Event{Type: EventUpdate, Old: &old, New: &c})
		}
	}
	for _, k := range deletes {
		if old, had := m.byKind[k.Kind][nsName{k.Namespace, k.Name}]; had {
			delete(m.byKind[k.Kind], nsName{k.Namespace, k.Name})
			events = append(events, Event{Type: EventDelete, Old: &old})
		}
	}
	m.mu.Unlock()
	if len(events) > 0 {
		for _, h := range m.handlers {
			h(events)
		}
	}
}

// SortConfigs sorts by kind, namespace, name: the order every List
// returns.
func SortConfigs(cs []config.Config) {
	slices.SortFunc(cs, func(a, b config.Config) int {
		if c := strings.Compare(a.GVK.Kind, b.GVK.Kind); c != 0 {
			return c
		}
		if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
}
