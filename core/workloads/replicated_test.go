package workloads

import (
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/baremesh/baremesh/core/cluster"
	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/store"
	"github.com/baremesh/baremesh/core/testkit"
)

// replica is one daemon's controller over a real core/cluster table
// (memberlist on loopback, fast timers).
func replica(t *testing.T, name string, grace time.Duration, seeds ...string) (*fixture, *cluster.Table) {
	tbl, err := cluster.New(cluster.Options{Name: name, Bind: "127.0.0.1:0", Seeds: seeds, Grace: grace,
		ReapInterval: 20 * time.Millisecond, Rejoin: 100 * time.Millisecond,
		Memberlist: func(c *memberlist.Config) {
			c.ProbeInterval, c.ProbeTimeout, c.SuspicionMult = 100*time.Millisecond, 50*time.Millisecond, 2
			c.GossipInterval, c.PushPullInterval = 20*time.Millisecond, 300*time.Millisecond
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tbl.Shutdown(false) })
	f := &fixture{t: t, agg: store.NewAggregate(), own: store.NewMemory()}
	f.files = f.agg.AddSource("file:/conf")
	f.agg.AttachMemory("baremesh", f.own)
	f.files.Synced()
	f.files.Update([]config.Config{group("ns", "reviews", "rev", false)}, nil)
	c, err := New(Options{Store: f.own, Config: f.agg, OwnSource: "baremesh", Controller: "baremeshd@" + name,
		StateFile: f.state, Registrations: tbl, Metrics: NewMetrics(nil)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	f.c = c
	return f, tbl
}

// TestReplicatedRegistration: a proxy registered at a shows at b, owned by
// a; it moves to b (connect at b, then a's late disconnect) → b owns it and
// it is never removed; it leaves → removed on both after grace; group
// deleted (on every replica) → removed everywhere, though still connected.
func TestReplicatedRegistration(t *testing.T) {
	const grace = 300 * time.Millisecond
	a, ta := replica(t, "a", grace)
	b, _ := replica(t, "b", grace, ta.Addr())
	ctrl := func(f *fixture) string {
		c, ok := f.entry("ns", "reviews-10.0.0.7")
		if !ok {
			return ""
		}
		if c.Annotations[AnnotationDisconnectedAt] != "" {
			return "disconnected"
		}
		return c.Annotations[AnnotationController]
	}
	pa := proxy("ns", "reviews", "10.0.0.7", "rev")
	if err := a.c.Connect(pa); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "replicated entries", func() bool { return ctrl(a) == "baremeshd@a" && ctrl(b) == "baremeshd@a" })

	// Moves to b before a sees its stream end.
	pb := proxy("ns", "reviews", "10.0.0.7", "rev")
	if err := b.c.Connect(pb); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "replicated entries", func() bool { return ctrl(a) == "baremeshd@b" && ctrl(b) == "baremeshd@b" })
	a.c.Disconnect(pa)
	deadline := time.Now().Add(3 * grace)
	for time.Now().Before(deadline) {
		if ctrl(a) != "baremeshd@b" || ctrl(b) != "baremeshd@b" {
			t.Fatalf("after a's late disconnect: a %q b %q, want owned by b", ctrl(a), ctrl(b))
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Health from the owner reaches a.
	b.c.Report(pb, HealthType, "down", true)
	testkit.Eventually(t, "replicated entries", func() bool {
		c, ok := a.entry("ns", "reviews-10.0.0.7")
		return ok && c.Annotations["baremesh.io/health"] == "unhealthy"
	})
	// Leaves for good: removed on both after grace.
	left := time.Now()
	b.c.Disconnect(pb)
	testkit.Eventually(t, "replicated entries", func() bool { return ctrl(a) == "" && ctrl(b) == "" })
	if el := time.Since(left); el < grace {
		t.Fatalf("removed after %v, before the grace period %v", el, grace)
	}
	// Group deleted: a connected entry goes everywhere.
	if err := a.c.Connect(proxy("ns", "reviews", "10.0.0.8", "rev")); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "replicated entries", func() bool { _, ok := b.entry("ns", "reviews-10.0.0.8"); return ok })
	for _, f := range []*fixture{a, b} { // every replica reads the same config
		f.files.Update(nil, []config.Key{{Kind: config.WorkloadGroup, Namespace: "ns", Name: "reviews"}})
		f.c.Resync()
	}
	testkit.Eventually(t, "replicated entries", func() bool {
		_, inA := a.entry("ns", "reviews-10.0.0.8")
		_, inB := b.entry("ns", "reviews-10.0.0.8")
		return !inA && !inB
	})
}
