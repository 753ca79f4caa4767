package dirwatch

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// asNobody runs the tests matching pattern from a copy of this test
// binary as uid/gid 65534 with a TMPDIR that user owns, and fails if they
// fail (as sources/file's tests do: root reads every directory).
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
	tmp, bin := filepath.Join(base, "tmp"), filepath.Join(base, "dirwatch.test")
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
