package validate

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/baremesh/baremesh/sources/file"
)

// Issue #11 item 6: validate names a directory it cannot read (it used to
// skip it in silence). Root reads every directory, so as root the test
// runs itself again as nobody (uid 65534) from a copy of the test binary.
func TestValidateUnreadableDir(t *testing.T) {
	if os.Geteuid() == 0 {
		if os.Getenv("BAREMESH_TEST_AS_NOBODY") != "" {
			t.Fatal("still root after dropping privileges")
		}
		rerunAsNobody(t, "^TestValidateUnreadableDir$")
		return
	}
	dir := t.TempDir()
	write(t, dir, "a.yaml", strings.NewReplacer("NAME", "a", "PORT", "80").Replace(se))
	sub := filepath.Dir(write(t, dir, "sub/b.yaml", strings.NewReplacer("NAME", "b", "PORT", "80").Replace(se)))
	if err := os.Chmod(sub, 0); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(sub, 0o755)
	var out, errOut bytes.Buffer
	if code := Main([]string{dir}, file.Limits{}, &out, &errOut); code != 1 {
		t.Fatalf("exit %d, want 1: %s", code, out.String())
	}
	want := sub + ": cannot read directory: permission denied; the config files below it are not loaded\n"
	if out.String() != want {
		t.Fatalf("output %q, want %q", out.String(), want)
	}
}

func rerunAsNobody(t *testing.T, pattern string) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	base, err := os.MkdirTemp("", "asnobody")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(base)
	tmp, bin := filepath.Join(base, "tmp"), filepath.Join(base, "validate.test")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	in, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	outf, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.Copy(outf, in)
	for _, e := range []error{err, outf.Close(), os.Chmod(base, 0o755), os.Chown(tmp, 65534, 65534)} {
		if e != nil {
			t.Fatal(e)
		}
	}
	cmd := exec.Command(bin, "-test.run="+pattern, "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp, "HOME="+tmp, "BAREMESH_TEST_AS_NOBODY=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	got, err := cmd.CombinedOutput()
	t.Logf("as nobody:\n%s", got)
	if err != nil || !strings.Contains(string(got), "--- PASS") {
		t.Fatalf("as nobody: %v", err)
	}
}
