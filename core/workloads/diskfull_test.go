package workloads

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/testkit"
)

// TestStateSavedAfterDiskFull (issue #32 item 3): the state directory's
// file system fills up. A registration made then cannot be saved: the
// failure is counted, no temporary file is left behind, and once space is
// freed the state is saved without waiting for another change.
func TestStateSavedAfterDiskFull(t *testing.T) {
	dir := testkit.Tmpfs(t, "256k")
	f := &fixture{t: t, state: filepath.Join(dir, "workloads", "entries.json")}
	g := newFixture(t, time.Minute, false)
	f.agg, f.files, f.own = g.agg, g.files, g.own
	m := NewMetrics(nil)
	c, err := New(Options{Store: f.own, Config: f.agg, OwnSource: "baremesh", Grace: time.Minute, StateFile: f.state, Controller: "test", Metrics: m,
		Registrations: g.newTable(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	f.c = c
	f.files.Update([]config.Config{group("ns", "reviews", "rev", false)}, nil)

	if err := os.MkdirAll(filepath.Dir(f.state), 0o700); err != nil {
		t.Fatal(err)
	}
	filler := filepath.Join(dir, "filler")
	testkit.FillDisk(t, filler)
	if err := c.Connect(proxy("ns", "reviews", "10.0.0.1", "rev")); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "a failed save to be counted", func() bool { return testutil.ToFloat64(m.saveFailures) >= 1 })
	for _, name := range dirNames(t, filepath.Dir(f.state)) {
		if strings.Contains(name, "tmp") {
			t.Errorf("%s left in %s after a failed save", name, filepath.Dir(f.state))
		}
	}
	if _, err := os.Stat(f.state); err == nil {
		t.Fatalf("%s saved on a full disk?", f.state)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "the state saved once space is free, with no other change", func() bool {
		data, err := os.ReadFile(f.state)
		return err == nil && bytes.Contains(data, []byte("10.0.0.1"))
	})
	if left := dirNames(t, filepath.Dir(f.state)); len(left) != 1 {
		t.Errorf("%s holds %v, want entries.json only", filepath.Dir(f.state), left)
	}
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}
