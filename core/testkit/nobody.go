package testkit

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// AsNobody reports whether the test must run as another user to mean
// anything (root reads every directory whatever its mode) and, if so, has
// already run it: the tests matching pattern, from a copy of this test
// binary, as uid/gid 65534 with a TMPDIR and HOME that user owns; t fails
// if they fail or none ran. A test of unreadable files starts with
//
//	if testkit.AsNobody(t, "^TestName$") {
//		return
//	}
func AsNobody(t *testing.T, pattern string) bool {
	t.Helper()
	if os.Geteuid() != 0 {
		return false
	}
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
	defer os.RemoveAll(base)
	tmp, bin := filepath.Join(base, "tmp"), filepath.Join(base, filepath.Base(self))
	if err := os.Mkdir(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, step := range []error{os.Chmod(base, 0o755), os.Chown(tmp, 65534, 65534), copyExecutable(self, bin)} {
		if step != nil {
			t.Fatal(step)
		}
	}
	cmd := exec.Command(bin, "-test.run="+pattern, "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp, "HOME="+tmp, "BAREMESH_TEST_AS_NOBODY=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	t.Logf("as nobody:\n%s", out)
	if err != nil {
		t.Fatalf("as nobody: %v", err)
	}
	if !strings.Contains(string(out), "--- PASS") {
		t.Fatal("as nobody: no test ran")
	}
	return true
}

func copyExecutable(from, to string) error {
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
