package workloads

import (
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/store"
	"github.com/baremesh/baremesh/core/testkit"
)

// TestStateReadableByThePreviousRelease: the release before the one
// lifecycle read a state file's "entries" when it ran without replicas and
// its "records" with them; a file this release writes carries both, so a
// downgrade in either mode keeps the registrations (before, "entries" was
// empty and a downgraded single daemon started with none, then saved
// that). This release, reading its own file back, restores each
// registration once.
func TestStateReadableByThePreviousRelease(t *testing.T) {
	const grace = time.Minute
	f := newFixture(t, grace, false)
	f.files.Update([]config.Config{group("ns", "reviews", "rev", false)}, nil)
	for _, ip := range []string{"10.0.0.7", "10.0.0.8"} {
		if err := f.c.Connect(proxy("ns", "reviews", ip, "rev")); err != nil {
			t.Fatal(err)
		}
	}
	// The previous release's reader: version 1, entries with their built
	// WorkloadEntry (its standalone path serves that before the groups are
	// read), records for its replicated path.
	var old struct {
		Version int `json:"version"`
		Entries []struct {
			Namespace, Name, Address string
			Built                    *struct{ Spec json.RawMessage } `json:"built"`
		} `json:"entries"`
		Records []json.RawMessage `json:"records"`
	}
	testkit.Eventually(t, "both registrations saved in both forms", func() bool {
		data, err := os.ReadFile(f.state)
		if err != nil || json.Unmarshal(data, &old) != nil {
			return false
		}
		return len(old.Entries) == 2 && len(old.Records) == 2
	})
	if old.Version != 1 {
		t.Fatalf("format %d: the previous release reads 1 only", old.Version)
	}
	for _, e := range old.Entries {
		if e.Namespace != "ns" || e.Address == "" || e.Built == nil || len(e.Built.Spec) == 0 {
			t.Errorf("entry as the previous release reads it: %+v", e)
		}
	}

	// This release restarts on its own file: two registrations, not four.
	g := &fixture{t: t, agg: store.NewAggregate(), own: store.NewMemory(), state: f.state, clock: f.clock, grace: grace}
	g.files = g.agg.AddSource("file:/conf")
	g.agg.AttachMemory("baremesh", g.own)
	g.c = g.newController(grace, false)
	g.waitEntry("ns", "reviews-10.0.0.7")
	g.waitEntry("ns", "reviews-10.0.0.8")
	if r := g.c.Registrations(); len(r) != 2 {
		t.Fatalf("registrations after a restart: %d, want 2: %+v", len(r), r)
	}
}
