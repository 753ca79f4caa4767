package file_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/sources/file"
)

// Start-up reads and parses files in parallel (issue #11 item 5); the
// result is the same as one by one, problems and duplicates included
// (run with -race).
func TestParallelStartup(t *testing.T) {
	dir := t.TempDir()
	for i := range 200 {
		write(t, filepath.Join(dir, fmt.Sprintf("d%d", i%7), fmt.Sprintf("f%03d.yaml", i)), strings.Replace(good, "name: a", fmt.Sprintf("name: s%d", i), 1))
	}
	bad := filepath.Join(dir, "d0", "bad.yaml")
	write(t, bad, strings.Replace(good, "80", "0", 1))
	dup := filepath.Join(dir, "d9", "dup.yaml")
	write(t, dup, strings.Replace(good, "name: a", "name: s5", 1))
	r := run(t, file.Options{Dirs: []string{dir}})
	if n := len(r.agg.List(config.ServiceEntry, "")); n != 200 {
		t.Fatalf("resources = %d, want 200", n)
	}
	checkProblem(t, r, bad, 6, `ports\[0\]\.number`)
	checkProblem(t, r, dup, 1, `already defined in .*f005\.yaml:1`)
}
