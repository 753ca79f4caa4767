package store

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/baremesh/baremesh/core/config"
)

// Sink is the write side a source is given: it delivers its state in
// batches and reports its problems. Safe for concurrent use.
type Sink interface {
	// Update applies one batch: configs the source now holds (added or
	// changed) and keys it no longer holds. A batch is atomic for readers
	// and handlers.
	Update(upserts []config.Config, deletes []config.Key)
	// Synced says the source has delivered its initial state.
	Synced()
	// SetProblems replaces the problems the source reports for origin (a
	// file path, an upstream address). An empty list clears them.
	SetProblems(origin string, problems []Problem)
}

// Problem is input a source rejected. The resources that origin held
// before stay in force.
type Problem struct {
	Source   string    `json:"source"`
	Origin   string    `json:"origin"`
	Line     int       `json:"line,omitempty"`
	Resource string    `json:"resource,omitempty"`
	Error    string    `json:"error"`
	Since    time.Time `json:"since"`
}

// Conflict is a key that more than one source holds. Winner is the source
// whose config is in force; Losers are the others, in precedence order.
type Conflict struct {
	Key    config.Key `json:"key"`
	Winner string     `json:"winner"`
	Losers []string   `json:"losers"`
}

// Aggregate merges sources into one ConfigStore.
//
// Precedence: sources are ranked in the order they were added with
// AddSource; when several hold the same kind/namespace/name, the
// earliest-added wins and the others are reported by Conflicts. baremeshd
// adds, in order: config directories (in the order given), MCP upstreams,
// Kubernetes clusters, then baremesh's own state (auto-registered
// WorkloadEntries), so an operator's file always overrides what baremesh
// writes itself.
//
// Events are delivered only when the winning content of a key changes.
type Aggregate struct {
	writeMu  sync.Mutex // serialises writers, so handlers see batches in order
	mu       sync.RWMutex
	sources  []*sourceState
	merged   map[config.Kind]map[nsName]*winner
	handlers []Handler
	synced   chan struct{}
	// sorted holds each kind's winners in List's order, built on the
	// first read after the kind changed (index.go); never altered once
	// built, so readers use it without the lock.
	sorted map[config.Kind][]*config.Config
	// conflicts: the keys more than one source holds, kept by remerge.
	conflicts map[config.Key]struct{}
}

// winner is the config in force for a key and the rank of its source.
// A winner is never altered once stored: a change stores a new one, so
// the sorted index can share it.
type winner struct {
	cfg config.Config
	src int
}

type sourceState struct {
	agg      *Aggregate
	rank     int
	name     string
	configs  map[config.Key]config.Config
	problems map[string][]Problem
	synced   bool
}

var _ ConfigStore = (*Aggregate)(nil)
var _ Sink = (*sourceState)(nil)

// NewAggregate returns an aggregate with no sources.
func NewAggregate() *Aggregate {
	return &Aggregate{merged: map[config.Kind]map[nsName]*winner{}, synced: make(chan struct{}),
		sorted: map[config.Kind][]*config.Config{}, conflicts: map[config.Key]struct{}{}}
}

// AddSource registers a source with the next (lower) precedence and
// returns its Sink. Add every source before any of them delivers.
func (a *Aggregate) AddSource(name string) Sink {
	a.writeMu.Lock()
	defer a.writeMu.Unlock()
	a.mu.Lock()
	defer a.mu.Unlock()
	s := &sourceState{agg: a, rank: len(a.sources), name: name, configs: map[config.Key]config.Config{}, problems: map[string][]Problem{}}
	a.sources = append(a.sources, s)
	return s
}

// AttachMemory makes m a source of the aggregate: its current content and
// every later change flow in under name.
func (a *Aggregate) AttachMemory(name string, m *Memory) {
	sink := a.AddSource(name)
	m.Subscribe(func(events []Event) {
		var ups []config.Config
		var dels []config.Key
		for _, e := range events {
			if e.New != nil {
				ups = append(ups, *e.New)
			} else {
				dels = append(dels, e.Old.Key())
			}
		}
		sink.Update(ups, dels)
	})
	var all []config.Config
	for _, k := range config.Kinds() {
		all = append(all, m.List(k, "")...)
	}
	sink.Update(all, nil)
	sink.Synced()
}

// Get implements Reader.
func (a *Aggregate) Get(kind config.Kind, namespace, name string) (config.Config, bool) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	w, ok := a.merged[kind][nsName{namespace, name}]
	if !ok {
		return config.Config{}, false
	}
	return w.cfg, true
}

// List implements Reader. It copies from the sorted index (index.go);
// Sorted reads the same without the copy.
func (a *Aggregate) List(kind config.Kind, namespace string) []config.Config {
	view := a.Sorted(kind, namespace)
	out := make([]config.Config, len(view))
	for i, c := range view {
		out[i] = *c
	}
	return out
}

// Subscribe implements Watcher.
func (a *Aggregate) Subscribe(h Handler) {
	a.writeMu.Lock()
	defer a.writeMu.Unlock()
	a.handlers = append(a.handlers, h)
}

// WaitSynced blocks until every source added so far has called Synced, or
// ctx ends.
func (a *Aggregate) WaitSynced(ctx context.Context) error {
	select {
	case <-a.synced:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// SourceOf returns the name of the source whose config is in force for
// key.
func (a *Aggregate) SourceOf(key config.Key) (string, bool) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	w, ok := a.merged[key.Kind][nsName{key.Namespace, key.Name}]
	if !ok {
		return "", false
	}
	return a.sources[w.src].name, true
}

// Conflicts returns every key held by more than one source, sorted by
// key. Its cost is in the conflicts, not the keys (remerge keeps the set).
func (a *Aggregate) Conflicts() []Conflict {
	a.mu.RLock()
	defer a.mu.RUnlock()
	var out []Conflict
	for k := range a.conflicts {
		var hs []string
		for _, s := range a.sources {
			if _, ok := s.configs[k]; ok {
				hs = append(hs, s.name)
			}
		}
		out = append(out, Conflict{Key: k, Winner: hs[0], Losers: hs[1:]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key.String() < out[j].Key.String() })
	return out
}

// Problems returns every problem every source reports, sorted by source,
// origin and line.
func (a *Aggregate) Problems() []Problem {
	a.mu.RLock()
	defer a.mu.RUnlock()
	var out []Problem
	for _, s := range a.sources {
		for _, ps := range s.problems {
			out = append(out, ps...)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Source != out[j].Source {
			return out[i].Source < out[j].Source
		}
		if out[i].Origin != out[j].Origin {
			return out[i].Origin < out[j].Origin
		}
		return out[i].Line < out[j].Line
	})
	return out
}

// Update implements Sink.
func (s *sourceState) Update(upserts []config.Config, deletes []config.Key) {
	a := s.agg
	a.writeMu.Lock()
	defer a.writeMu.Unlock()
	a.mu.Lock()
	touched := make(map[config.Key]struct{}, len(upserts)+len(deletes))
	for i := range upserts {
		k := upserts[i].Key()
		s.configs[k] = upserts[i]
		touched[k] = struct{}{}
	}
	for _, k := range deletes {
		if _, ok := s.configs[k]; ok {
			delete(s.configs, k)
			touched[k] = struct{}{}
		}
	}
	var events []Event
	for k := range touched {
		if e, ok := a.remerge(k); ok {
			events = append(events, e)
		}
	}
	a.mu.Unlock()
	if len(events) == 0 {
		return
	}
	sortEvents(events)
	for _, h := range a.handlers {
		h(events)
	}
}

// remerge recomputes the winner of k and whether k is a conflict; a.mu
// is held.
func (a *Aggregate) remerge(k config.Key) (Event, bool) {
	byName := a.merged[k.Kind]
	if byName == nil {
		byName = map[nsName]*winner{}
		a.merged[k.Kind] = byName
	}
	nn := nsName{k.Namespace, k.Name}
	old, had := byName[nn]
	var top *sourceState
	holders := 0
	for _, s := range a.sources {
		if _, ok := s.configs[k]; ok {
			if holders++; top == nil {
				top = s
			}
		}
	}
	if holders > 1 {
		a.conflicts[k] = struct{}{}
	} else {
		delete(a.conflicts, k)
	}
	if top == nil {
		if !had {
			return Event{}, false
		}
		delete(byName, nn)
		delete(a.sorted, k.Kind)
		return Event{Type: EventDelete, Old: &old.cfg}, true
	}
	c := top.configs[k]
	byName[nn] = &winner{cfg: c, src: top.rank}
	delete(a.sorted, k.Kind)
	switch {
	case !had:
		return Event{Type: EventAdd, New: &c}, true
	case !config.SameContent(&old.cfg, &c):
		return Event{Type: EventUpdate, Old: &old.cfg, New: &c}, true
	}
	return Event{}, false
}

// Synced implements Sink.
func (s *sourceState) Synced() {
	a := s.agg
	a.mu.Lock()
	defer a.mu.Unlock()
	s.synced = true
	for _, o := range a.sources {
		if !o.synced {
			return
		}
	}
	select {
	case <-a.synced:
	default:
		close(a.synced)
	}
}

// SetProblems implements Sink.
func (s *sourceState) SetProblems(origin string, problems []Problem) {
	a := s.agg
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(problems) == 0 {
		delete(s.problems, origin)
		return
	}
	for i := range problems {
		problems[i].Source = s.name
		problems[i].Origin = origin
	}
	s.problems[origin] = problems
}
