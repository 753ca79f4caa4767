package mcp_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/store"
	"github.com/baremesh/baremesh/core/testkit"
	"github.com/baremesh/baremesh/sources/mcp"
)

var seURL = mcp.TypeURL(config.ServiceEntry)

func se(host string, port uint32) *networking.ServiceEntry {
	return &networking.ServiceEntry{Hosts: []string{host}, Ports: []*networking.ServicePort{{Number: port, Name: "http", Protocol: "HTTP"}}, Resolution: networking.ServiceEntry_DNS}
}

// ses returns n ServiceEntries test/s00000… with port.
func ses(n int, port uint32) map[string]proto.Message {
	out := make(map[string]proto.Message, n)
	for i := 0; i < n; i++ {
		out[fmt.Sprintf("test/s%05d", i)] = se(fmt.Sprintf("s%05d.example.com", i), port)
	}
	return out
}

// world is an aggregate with recorded events and counted sink updates.
type world struct {
	agg *store.Aggregate

	mu      sync.Mutex
	events  []store.Event
	at      []time.Time
	updates int
}

type countSink struct {
	store.Sink
	w *world
}

func (s countSink) Update(ups []config.Config, dels []config.Key) {
	s.w.mu.Lock()
	s.w.updates++
	s.w.mu.Unlock()
	s.Sink.Update(ups, dels)
}

func newWorld() *world {
	w := &world{agg: store.NewAggregate()}
	w.agg.Subscribe(func(evs []store.Event) {
		now := time.Now()
		w.mu.Lock()
		for range evs {
			w.at = append(w.at, now)
		}
		w.events = append(w.events, evs...)
		w.mu.Unlock()
	})
	return w
}

func (w *world) source(name string) store.Sink { return countSink{w.agg.AddSource(name), w} }

func (w *world) counts() (events, updates int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.events), w.updates
}

func (w *world) deletes() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, e := range w.events {
		if e.Type == store.EventDelete {
			n++
		}
	}
	return n
}

func poll(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	testkit.EventuallyWithin(t, d, what, cond)
}

func (w *world) port(name string) int {
	c, ok := w.agg.Get(config.ServiceEntry, "test", name)
	if !ok {
		return 0
	}
	return int(c.Spec.(*networking.ServiceEntry).GetPorts()[0].GetNumber())
}

func (w *world) waitPort(t *testing.T, name string, port int) {
	t.Helper()
	poll(t, fmt.Sprintf("ServiceEntry test/%s with port %d", name, port), 10*time.Second, func() bool { return w.port(name) == port })
}

// problem returns the first problem whose origin or error contains s.
func (w *world) problem(s string) (store.Problem, bool) {
	for _, p := range w.agg.Problems() {
		if strings.Contains(p.Origin, s) || strings.Contains(p.Error, s) || strings.Contains(p.Resource, s) {
			return p, true
		}
	}
	return store.Problem{}, false
}

func (w *world) waitProblem(t *testing.T, s string) store.Problem {
	t.Helper()
	var p store.Problem
	poll(t, "a problem mentioning "+s, 10*time.Second, func() bool { var ok bool; p, ok = w.problem(s); return ok })
	return p
}

func waitNACK(t *testing.T, srv *standIn, s string) string {
	t.Helper()
	var got string
	poll(t, "a NACK mentioning "+s, 10*time.Second, func() bool {
		for _, n := range srv.nacks() {
			if strings.Contains(n, s) {
				got = n
				return true
			}
		}
		return false
	})
	return got
}
