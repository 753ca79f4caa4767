package workloads

import (
	"context"
	"testing"
	"time"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/testkit"
)

// TestFollowGroups (issue #31 item 1: the loop moved here from
// internal/daemon): an entry registered before the sources synced is
// rebuilt from its group's template once they have, an edit of the group
// rebuilds it, a deleted group removes it, and the loop ends with ctx
// (stopping the controller). Real aggregate and memory store.
func TestFollowGroups(t *testing.T) {
	f := newFixture(t, time.Minute, false)
	f.files.Update([]config.Config{group("ns", "reviews", "rev", false)}, nil)
	if err := f.c.Connect(proxy("ns", "reviews", "10.0.0.7", "rev")); err != nil {
		t.Fatal(err)
	}
	f.waitEntry("ns", "reviews-10.0.0.7")
	ctx, cancel := context.WithCancel(t.Context())
	synced := make(chan struct{})
	done := make(chan struct{})
	go func() { defer close(done); f.c.FollowGroups(ctx, f.agg, synced) }()
	weight := func() uint32 {
		c, ok := f.entry("ns", "reviews-10.0.0.7")
		if !ok {
			return 0
		}
		return c.Spec.(*networking.WorkloadEntry).GetWeight()
	}
	// An edit before synced: the loop waits, then rebuilds.
	g := group("ns", "reviews", "rev", false)
	g.Spec.(*networking.WorkloadGroup).Template.Weight = 5
	f.files.Update([]config.Config{g}, nil)
	if w := weight(); w != 3 {
		t.Fatalf("weight %d before the sources synced, want the template's 3 of the connect", w)
	}
	close(synced)
	testkit.Eventually(t, "entry rebuilt once synced", func() bool { return weight() == 5 })
	g = group("ns", "reviews", "rev", false)
	g.Spec.(*networking.WorkloadGroup).Template.Weight = 7
	f.files.Update([]config.Config{g}, nil)
	testkit.Eventually(t, "entry rebuilt after a group edit", func() bool { return weight() == 7 })
	f.files.Update(nil, []config.Key{g.Key()})
	testkit.Eventually(t, "entry removed with its group", func() bool { _, ok := f.entry("ns", "reviews-10.0.0.7"); return !ok })
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("FollowGroups did not return within 10s of cancel")
	}
}
