// Package sourcetest is the conformance suite every config source passes:
// add, update, delete, bad input keeps the last good state, restart, burst
// coalescing and ordering. A source plugs in through a Harness that knows
// how to change its backing input (files, an upstream server, a cluster).
//
// It imports core only.
package sourcetest

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/store"
)

// Harness drives one source implementation.
type Harness interface {
	// Start runs a new instance of the source over the current backing
	// input, delivering to sink. stop ends it and waits for it to exit.
	Start(t *testing.T, sink store.Sink) (stop func())
	// Put makes unit (a file, an upstream resource set) hold manifests,
	// a multi-document YAML string.
	Put(t *testing.T, unit, manifests string)
	// PutBad makes unit hold input the source must reject.
	PutBad(t *testing.T, unit string)
	// Delete removes unit.
	Delete(t *testing.T, unit string)
	// Coalesces reports whether a burst of changes is delivered as few
	// updates (true for sources that debounce).
	Coalesces() bool
}

// Timeout bounds every wait of the suite.
var Timeout = 10 * time.Second

// ServiceEntry returns a manifest of a ServiceEntry with one port whose
// number is port.
func ServiceEntry(name string, port int) string {
	return fmt.Sprintf(`apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata:
  name: %s
  namespace: test
spec:
  hosts: [%s.example.com]
  ports:
  - {number: %d, name: http, protocol: HTTP}
  resolution: DNS
`, name, name, port)
}

// Run runs the suite; newHarness makes a fresh harness for each case.
func Run(t *testing.T, newHarness func(t *testing.T) Harness) {
	t.Run("Add", func(t *testing.T) {
		h, env := start(t, newHarness)
		h.Put(t, "a", ServiceEntry("a", 80))
		env.waitPort(t, "a", 80)
		env.expectEvents(t, store.EventAdd)
	})
	t.Run("UpdateAndNoOp", func(t *testing.T) {
		h, env := start(t, newHarness)
		h.Put(t, "a", ServiceEntry("a", 80))
		env.waitPort(t, "a", 80)
		h.Put(t, "a", ServiceEntry("a", 81))
		env.waitPort(t, "a", 81)
		env.expectEvents(t, store.EventAdd, store.EventUpdate)
		// The same content again raises no event: follow it with a real
		// change and check that only that change arrived.
		h.Put(t, "a", ServiceEntry("a", 81))
		h.Put(t, "b", ServiceEntry("b", 90))
		env.waitPort(t, "b", 90)
		env.expectEvents(t, store.EventAdd, store.EventUpdate, store.EventAdd)
	})
	t.Run("Delete", func(t *testing.T) {
		h, env := start(t, newHarness)
		h.Put(t, "a", ServiceEntry("a", 80))
		env.waitPort(t, "a", 80)
		h.Delete(t, "a")
		env.waitGone(t, "a")
		env.expectEvents(t, store.EventAdd, store.EventDelete)
	})
	t.Run("BadInputKeepsLastGood", func(t *testing.T) {
		h, env := start(t, newHarness)
		h.Put(t, "a", ServiceEntry("a", 80))
		env.waitPort(t, "a", 80)
		h.PutBad(t, "a")
		env.waitProblem(t, "a")
		if _, ok := env.agg.Get(config.ServiceEntry, "test", "a"); !ok {
			t.Fatal("bad input removed the last good resource")
		}
		h.Put(t, "a", ServiceEntry("a", 82))
		env.waitPort(t, "a", 82)
		env.waitNoProblem(t, "a")
		env.expectEvents(t, store.EventAdd, store.EventUpdate)
	})
	t.Run("Restart", func(t *testing.T) {
		h := newHarness(t)
		h.Put(t, "a", ServiceEntry("a", 80))
		h.Put(t, "b", ServiceEntry("b", 80))
		for i := 0; i < 2; i++ {
			env := newEnv()
			stop := h.Start(t, env.sink)
			env.waitSynced(t)
			if n := len(env.agg.List(config.ServiceEntry, "")); n != 2 {
				stop()
				t.Fatalf("run %d: after sync the store holds %d ServiceEntries, want 2", i, n)
			}
			stop()
		}
	})
	t.Run("BurstCoalesces", func(t *testing.T) {
		h, env := start(t, newHarness)
		const n = 20
		for i := 0; i < n; i++ {
			h.Put(t, fmt.Sprintf("u%02d", i), ServiceEntry(fmt.Sprintf("s%02d", i), 80))
		}
		env.waitPort(t, fmt.Sprintf("s%02d", n-1), 80)
		deadline := time.Now().Add(Timeout)
		for len(env.agg.List(config.ServiceEntry, "")) < n && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if got := len(env.agg.List(config.ServiceEntry, "")); got != n {
			t.Fatalf("store holds %d ServiceEntries after the burst, want %d", got, n)
		}
		if b := env.batches(); h.Coalesces() && b > 3 {
			t.Fatalf("a burst of %d changes gave %d updates; want it coalesced into at most 3", n, b)
		}
	})
	t.Run("OrderingLastWriteWins", func(t *testing.T) {
		h, env := start(t, newHarness)
		for port := 100; port <= 110; port++ {
			h.Put(t, "a", ServiceEntry("a", port))
		}
		env.waitPort(t, "a", 110)
		// Whatever was coalesced, ports must only ever go up.
		last := 0
		for _, p := range env.portsSeen() {
			if p < last {
				t.Fatalf("events out of order: port %d after %d (all: %v)", p, last, env.portsSeen())
			}
			last = p
		}
	})
}

func start(t *testing.T, newHarness func(t *testing.T) Harness) (Harness, *env) {
	h := newHarness(t)
	e := newEnv()
	stop := h.Start(t, e.sink)
	t.Cleanup(stop)
	e.waitSynced(t)
	return h, e
}

type env struct {
	agg  *store.Aggregate
	sink *countingSink

	mu     sync.Mutex
	events []store.Event
}

func newEnv() *env {
	e := &env{agg: store.NewAggregate()}
	e.sink = &countingSink{Sink: e.agg.AddSource("under-test")}
	e.agg.Subscribe(func(evs []store.Event) {
		e.mu.Lock()
		e.events = append(e.events, evs...)
		e.mu.Unlock()
	})
	return e
}

type countingSink struct {
	store.Sink
	mu sync.Mutex
	n  int
}

func (s *countingSink) Update(ups []config.Config, dels []config.Key) {
	s.mu.Lock()
	s.n++
	s.mu.Unlock()
	s.Sink.Update(ups, dels)
}

func (e *env) batches() int {
	e.sink.mu.Lock()
	defer e.sink.mu.Unlock()
	return e.sink.n
}

func (e *env) waitSynced(t *testing.T) {
	t.Helper()
	ctx, cancel := contextWithTimeout()
	defer cancel()
	if err := e.agg.WaitSynced(ctx); err != nil {
		t.Fatalf("source never synced: %v", err)
	}
}

func (e *env) poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(Timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", Timeout, what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (e *env) waitPort(t *testing.T, name string, want int) {
	t.Helper()
	e.poll(t, fmt.Sprintf("ServiceEntry %s with port %d", name, want), func() bool {
		c, ok := e.agg.Get(config.ServiceEntry, "test", name)
		return ok && sePort(c) == want
	})
}

func (e *env) waitGone(t *testing.T, name string) {
	t.Helper()
	e.poll(t, "ServiceEntry "+name+" to be deleted", func() bool {
		_, ok := e.agg.Get(config.ServiceEntry, "test", name)
		return !ok
	})
}

func (e *env) hasProblem(unit string) bool {
	for _, p := range e.agg.Problems() {
		if strings.Contains(p.Origin, unit) {
			return true
		}
	}
	return false
}

func (e *env) waitProblem(t *testing.T, unit string) {
	t.Helper()
	e.poll(t, "a problem reported for "+unit, func() bool { return e.hasProblem(unit) })
}

func (e *env) waitNoProblem(t *testing.T, unit string) {
	t.Helper()
	e.poll(t, "the problem of "+unit+" to clear", func() bool { return !e.hasProblem(unit) })
}

// expectEvents checks the event types seen so far. The store shows a
// change to readers before its handlers run, so a caller that polled the
// store may be ahead of the events: wait (with the deadline) until as many
// events as wanted arrived, then compare them all.
func (e *env) expectEvents(t *testing.T, want ...store.EventType) {
	t.Helper()
	deadline := time.Now().Add(Timeout)
	for {
		e.mu.Lock()
		n := len(e.events)
		e.mu.Unlock()
		if n >= len(want) || time.Now().After(deadline) {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	got := make([]store.EventType, len(e.events))
	for i, ev := range e.events {
		got[i] = ev.Type
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("events = %v, want %v", got, want)
	}
}

func (e *env) portsSeen() []int {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []int
	for _, ev := range e.events {
		if ev.New != nil {
			out = append(out, sePort(*ev.New))
		}
	}
	return out
}
