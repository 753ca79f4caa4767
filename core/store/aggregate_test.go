package store

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/baremesh/baremesh/core/config"
)

// se is a ServiceEntry for host, named name in namespace ns.
func se(ns, name, host string) config.Config {
	return config.Config{
		Meta: config.Meta{GVK: config.SchemaFor(config.ServiceEntry).GVK(), Namespace: ns, Name: name},
		Spec: &networking.ServiceEntry{Hosts: []string{host}},
	}
}

func host(c config.Config) string { return c.Spec.(*networking.ServiceEntry).GetHosts()[0] }

// recorder collects the batches a handler receives, as "TYPE KEY HOST".
type recorder struct{ batches [][]string }

func (r *recorder) handle(events []Event) {
	var b []string
	for _, e := range events {
		c := e.New
		if c == nil {
			c = e.Old
		}
		b = append(b, fmt.Sprintf("%v %s %s", e.Type, e.Key(), host(*c)))
	}
	r.batches = append(r.batches, b)
}

func (r *recorder) take() string {
	var out []string
	for _, b := range r.batches {
		out = append(out, strings.Join(b, ", "))
	}
	r.batches = nil
	return strings.Join(out, " | ")
}

// TestAggregatePrecedence: the earliest-added source wins a key; when it
// lets the key go the next holder's config comes into force (an update),
// and a lower source's change under a winner is no event at all.
func TestAggregatePrecedence(t *testing.T) {
	a := NewAggregate()
	var rec recorder
	a.Subscribe(rec.handle)
	files, mcp := a.AddSource("file"), a.AddSource("mcp")

	mcp.Update([]config.Config{se("ns", "a", "mcp.example")}, nil)
	if got, want := rec.take(), "add ServiceEntry/ns/a mcp.example"; got != want {
		t.Fatalf("events %q, want %q", got, want)
	}
	files.Update([]config.Config{se("ns", "a", "file.example")}, nil)
	if got, want := rec.take(), "update ServiceEntry/ns/a file.example"; got != want {
		t.Fatalf("higher source takes over: events %q, want %q", got, want)
	}
	if c, _ := a.Get(config.ServiceEntry, "ns", "a"); host(c) != "file.example" {
		t.Errorf("in force: %s, want file.example", host(c))
	}
	if s, _ := a.SourceOf(config.Key{Kind: config.ServiceEntry, Namespace: "ns", Name: "a"}); s != "file" {
		t.Errorf("SourceOf: %q, want file", s)
	}
	mcp.Update([]config.Config{se("ns", "a", "mcp2.example")}, nil)
	if got := rec.take(); got != "" {
		t.Errorf("a change under the winner: events %q, want none", got)
	}
	files.Update(nil, []config.Key{{Kind: config.ServiceEntry, Namespace: "ns", Name: "a"}})
	if got, want := rec.take(), "update ServiceEntry/ns/a mcp2.example"; got != want {
		t.Errorf("winner lets go: events %q, want %q", got, want)
	}
	mcp.Update(nil, []config.Key{{Kind: config.ServiceEntry, Namespace: "ns", Name: "a"}})
	if got, want := rec.take(), "delete ServiceEntry/ns/a mcp2.example"; got != want {
		t.Errorf("last holder lets go: events %q, want %q", got, want)
	}
	if _, ok := a.Get(config.ServiceEntry, "ns", "a"); ok {
		t.Error("deleted key still in force")
	}
}

// TestAggregateEvents: a batch is one handler call sorted by key; a
// re-delivery of the same content (a re-read file, a status-only update)
// and the deletion of a key the source never held are no events.
func TestAggregateEvents(t *testing.T) {
	a := NewAggregate()
	var rec recorder
	a.Subscribe(rec.handle)
	s := a.AddSource("file")
	s.Update([]config.Config{se("ns", "b", "b.example"), se("ns", "a", "a.example"), se("other", "c", "c.example")}, nil)
	if got, want := rec.take(), "add ServiceEntry/ns/a a.example, add ServiceEntry/ns/b b.example, add ServiceEntry/other/c c.example"; got != want {
		t.Fatalf("events %q, want %q", got, want)
	}
	same := se("ns", "a", "a.example")
	same.ResourceVersion = "2"
	s.Update([]config.Config{same}, []config.Key{{Kind: config.ServiceEntry, Namespace: "ns", Name: "never"}})
	if got := rec.take(); got != "" {
		t.Errorf("same content: events %q, want none", got)
	}
	if got := a.List(config.ServiceEntry, "ns"); len(got) != 2 || got[0].Name != "a" || got[1].Name != "b" {
		t.Errorf("List(ns) = %v, want a, b", got)
	}
	if got := a.List(config.ServiceEntry, ""); len(got) != 3 {
		t.Errorf("List(all) has %d, want 3", len(got))
	}
}

// TestAggregateConflicts: every key held by several sources is listed
// with its winner and the losers in precedence order.
func TestAggregateConflicts(t *testing.T) {
	a := NewAggregate()
	one, two, three := a.AddSource("one"), a.AddSource("two"), a.AddSource("three")
	three.Update([]config.Config{se("ns", "x", "3"), se("ns", "only", "3")}, nil)
	two.Update([]config.Config{se("ns", "x", "2")}, nil)
	one.Update([]config.Config{se("ns", "x", "1")}, nil)
	got := a.Conflicts()
	if len(got) != 1 || got[0].Key.Name != "x" || got[0].Winner != "one" || strings.Join(got[0].Losers, ",") != "two,three" {
		t.Fatalf("conflicts %+v, want x won by one over two, three", got)
	}
	one.Update(nil, []config.Key{got[0].Key})
	if got := a.Conflicts(); len(got) != 1 || got[0].Winner != "two" || strings.Join(got[0].Losers, ",") != "three" {
		t.Errorf("after one lets go: %+v", got)
	}
}

// TestAggregateProblems: problems carry their source and origin, come
// sorted by source, origin and line, and an empty list clears an origin.
func TestAggregateProblems(t *testing.T) {
	a := NewAggregate()
	f, m := a.AddSource("file"), a.AddSource("mcp")
	m.SetProblems("istiod:15010", []Problem{{Error: "bad resource"}})
	f.SetProblems("/etc/b.yaml", []Problem{{Line: 9, Error: "late"}, {Line: 2, Error: "early"}})
	f.SetProblems("/etc/a.yaml", []Problem{{Line: 1, Error: "first"}})
	var got []string
	for _, p := range a.Problems() {
		got = append(got, fmt.Sprintf("%s %s:%d %s", p.Source, p.Origin, p.Line, p.Error))
	}
	want := "file /etc/a.yaml:1 first; file /etc/b.yaml:2 early; file /etc/b.yaml:9 late; mcp istiod:15010:0 bad resource"
	if strings.Join(got, "; ") != want {
		t.Errorf("problems\n %s\nwant\n %s", strings.Join(got, "; "), want)
	}
	f.SetProblems("/etc/b.yaml", nil)
	if n := len(a.Problems()); n != 2 {
		t.Errorf("after clearing /etc/b.yaml: %d problems, want 2", n)
	}
}

// TestAggregateSync: WaitSynced returns only when every source has
// synced; before that it ends with its context.
func TestAggregateSync(t *testing.T) {
	a := NewAggregate()
	s1, s2 := a.AddSource("one"), a.AddSource("two")
	s1.Synced()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := a.WaitSynced(ctx); err == nil {
		t.Fatal("synced with one source of two")
	}
	s2.Synced()
	s2.Synced() // twice is harmless
	if err := a.WaitSynced(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestAggregateMemory: an attached Memory store is a source like any
// other: its content at attach time and later changes flow in, at its
// rank.
func TestAggregateMemory(t *testing.T) {
	a := NewAggregate()
	files := a.AddSource("file")
	m := NewMemory()
	m.Apply([]config.Config{se("ns", "auto", "auto.example")}, nil)
	a.AttachMemory("state", m)
	if err := a.WaitSynced(contextDone(t)); err == nil {
		t.Fatal("synced before the file source")
	}
	files.Synced()
	if c, ok := a.Get(config.ServiceEntry, "ns", "auto"); !ok || host(c) != "auto.example" {
		t.Fatalf("memory content at attach: %v %v", c, ok)
	}
	var rec recorder
	a.Subscribe(rec.handle)
	m.Apply([]config.Config{se("ns", "auto", "auto2.example")}, nil)
	files.Update([]config.Config{se("ns", "auto", "file.example")}, nil)
	m.Apply(nil, []config.Key{{Kind: config.ServiceEntry, Namespace: "ns", Name: "auto"}})
	if got, want := rec.take(), "update ServiceEntry/ns/auto auto2.example | update ServiceEntry/ns/auto file.example"; got != want {
		t.Errorf("events %q, want %q", got, want)
	}
}

// contextDone is a context that has already ended.
func contextDone(t *testing.T) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}
