package validate

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/baremesh/baremesh/core/testkit"
	"github.com/baremesh/baremesh/sources/file"
)

// Issue #11 item 6: validate names a directory it cannot read (it used to
// skip it in silence). Root reads every directory, so as root the test
// runs itself again as nobody (uid 65534) from a copy of the test binary.
func TestValidateUnreadableDir(t *testing.T) {
	if testkit.AsNobody(t, "^TestValidateUnreadableDir$") {
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
