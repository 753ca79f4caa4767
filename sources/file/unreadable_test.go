package file_test

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/baremesh/baremesh/sources/file"
)

// Issue #11 item 6: a directory the daemon cannot read is a problem on
// /debug/configz, not only a log line, and its files come back when it
// can be read again.
//
// Root reads every directory whatever its mode, so as root the test runs
// itself again as nobody (uid 65534) from a copy of the test binary.
func TestUnreadableDir(t *testing.T) {
	if os.Geteuid() == 0 {
		asNobody(t, "^TestUnreadableDir$")
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

// asNobody runs the tests matching pattern from a copy of this test binary
// as uid/gid 65534 with a TMPDIR that user owns, and fails if they fail.
func asNobody(t *testing.T, pattern string) {
	t.Helper()
	if os.Getenv("BAREMESH_TEST_AS_NOBODY") != "" {
		t.Fatal("still root after dropping privileges")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	base, err := os.MkdirTemp("", "asnobody")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	tmp := filepath.Join(base, "tmp")
	bin := filepath.Join(base, "file.test")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, step := range []error{os.Chmod(base, 0o755), os.Chown(tmp, 65534, 65534), copyFile(self, bin)} {
		if step != nil {
			t.Fatal(step)
		}
	}
	cmd := exec.Command(bin, "-test.run="+pattern, "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp, "BAREMESH_TEST_AS_NOBODY=1", "HOME="+tmp)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	t.Logf("as nobody:\n%s", out)
	if err != nil {
		t.Fatalf("as nobody: %v", err)
	}
	if !strings.Contains(string(out), "--- PASS") {
		t.Fatal("as nobody: no test ran")
	}
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
