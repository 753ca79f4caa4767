package file_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/sources/file"
)

// TestCreationTime (issue #25): a file gives no creation time, so a
// resource gets the time the watcher first saw it, kept across edits,
// re-reads and a move to another file, new after it was deleted; a
// document's own metadata.creationTimestamp wins. MCP subscribers
// (istiod) order conflicting rules by it; before, it was always zero.
func TestCreationTime(t *testing.T) {
	dir := t.TempDir()
	before := time.Now()
	write(t, filepath.Join(dir, "a.yaml"), good)
	stamped := strings.Replace(seWithPort("b", "90"), "namespace: test}", "namespace: test, creationTimestamp: 2024-05-06T07:08:09Z}", 1)
	write(t, filepath.Join(dir, "b.yaml"), stamped)
	r := run(t, file.Options{Dirs: []string{dir}, Coalesce: 10e6})
	created := func(name string) time.Time {
		c, ok := r.agg.Get(config.ServiceEntry, "test", name)
		if !ok {
			return time.Time{}
		}
		return c.CreationTime
	}
	first := created("a")
	if first.Before(before) || first.After(time.Now()) {
		t.Fatalf("creation time %v, want the time it was first read (after %v)", first, before)
	}
	if want := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC); !created("b").Equal(want) {
		t.Fatalf("document's creationTimestamp: got %v, want %v", created("b"), want)
	}
	// An edit keeps it.
	write(t, filepath.Join(dir, "a.yaml"), seWithPort("a", "81"))
	poll(t, "edit", func() bool { return r.port("a") == 81 })
	if !created("a").Equal(first) {
		t.Fatalf("edit moved the creation time %v -> %v", first, created("a"))
	}
	// A move to another file keeps it: the new file is held back as a
	// duplicate until the old one goes, then takes the resource over.
	write(t, filepath.Join(dir, "c.yaml"), seWithPort("a", "82"))
	poll(t, "duplicate refused", func() bool { return r.problemFor(filepath.Join(dir, "c.yaml")) != "" })
	if err := os.Remove(filepath.Join(dir, "a.yaml")); err != nil {
		t.Fatal(err)
	}
	poll(t, "moved", func() bool { return r.port("a") == 82 })
	if !created("a").Equal(first) {
		t.Fatalf("move moved the creation time %v -> %v", first, created("a"))
	}
	// Deleted and made again: a new one.
	if err := os.Remove(filepath.Join(dir, "c.yaml")); err != nil {
		t.Fatal(err)
	}
	poll(t, "deleted", func() bool { return r.port("a") == 0 })
	write(t, filepath.Join(dir, "d.yaml"), good)
	poll(t, "made again", func() bool { return r.port("a") == 80 })
	if !created("a").After(first) {
		t.Fatalf("re-created resource kept creation time %v", created("a"))
	}
}
