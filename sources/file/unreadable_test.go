package file_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/baremesh/baremesh/core/testkit"
	"github.com/baremesh/baremesh/sources/file"
)

// Issue #11 item 6: a directory the daemon cannot read is a problem on
// /debug/configz, not only a log line, and its files come back when it
// can be read again.
//
// Root reads every directory whatever its mode, so as root the test runs
// itself again as nobody (uid 65534) from a copy of the test binary.
func TestUnreadableDir(t *testing.T) {
	if testkit.AsNobody(t, "^TestUnreadableDir$") {
		return
	}
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.yaml"), good)
	sub := filepath.Join(dir, "sub")
	write(t, filepath.Join(sub, "b.yaml"), strings.Replace(good, "name: a", "name: b", 1))
	if err := os.Chmod(sub, 0); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(sub, 0o755)
	r := run(t, file.Options{Dirs: []string{dir}, DirPoll: 20e6})
	checkProblem(t, r, sub, 0, `cannot read directory: permission denied; the config files below it are not loaded`)
	if r.port("a") != 80 || r.port("b") != 0 {
		t.Fatalf("a=%d b=%d", r.port("a"), r.port("b"))
	}
	if err := os.Chmod(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	poll(t, "b once sub is readable", func() bool { return r.port("b") == 80 && r.problemFor(sub) == "" })

	// Made unreadable while running: a problem, and what it held stays.
	if err := os.Chmod(sub, 0); err != nil {
		t.Fatal(err)
	}
	checkProblem(t, r, sub, 0, `permission denied`)
	checkProblem(t, r, filepath.Join(sub, "b.yaml"), 0, `permission denied`)
	if r.port("b") != 80 {
		t.Fatal("b dropped when its directory became unreadable")
	}
}
