package validate

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/baremesh/baremesh/sources/file"
)

const se = `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: NAME, namespace: ns}
spec:
  hosts: [NAME.mesh]
  ports: [{number: PORT, name: http, protocol: HTTP}]
  resolution: DNS
`

func write(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestValidate(t *testing.T) {
	dir := t.TempDir()
	good := strings.NewReplacer("NAME", "a", "PORT", "80").Replace(se)
	write(t, dir, "a.yaml", good)
	var out, errOut bytes.Buffer
	if code := Main([]string{dir}, file.Limits{}, &out, &errOut); code != 0 || out.Len() != 0 {
		t.Fatalf("good dir: exit %d, output %q", code, out.String())
	}
	bad := write(t, dir, "sub/b.yaml", strings.NewReplacer("NAME", "b", "PORT", "70000").Replace(se))
	dup := write(t, dir, "c.yaml", "# a comment\n"+good)
	write(t, dir, ".hidden.yaml", "not: [valid")
	out.Reset()
	if code := Main([]string{dir}, file.Limits{}, &out, &errOut); code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := []*regexp.Regexp{
		regexp.MustCompile("^" + regexp.QuoteMeta(dup) + `:2: ServiceEntry/ns/a: duplicate: already defined in .*a\.yaml:1$`),
		regexp.MustCompile("^" + regexp.QuoteMeta(bad) + `:6: ServiceEntry/ns/b: .*spec\.ports\[0\]\.number`),
	}
	if len(lines) != len(want) {
		t.Fatalf("got %d problems, want %d:\n%s", len(lines), len(want), out.String())
	}
	for _, w := range want {
		found := false
		for _, l := range lines {
			found = found || w.MatchString(l)
		}
		if !found {
			t.Errorf("no line matches %s in:\n%s", w, out.String())
		}
	}
	if code := Main([]string{filepath.Join(dir, "nope")}, file.Limits{}, &out, &errOut); code != 2 {
		t.Fatalf("missing path: exit %d, want 2", code)
	}
}

// Issue #11 items 1 and 2: validate reads as the daemon does. A FIFO or a
// symlink to a device is a named problem, never read (validate used to
// hang on the FIFO and read /dev/zero forever).
func TestValidateSpecialFiles(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "a.yaml", strings.NewReplacer("NAME", "a", "PORT", "80").Replace(se))
	pipe := filepath.Join(dir, "pipe.yaml")
	if err := syscall.Mkfifo(pipe, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, dev := range []string{"/dev/zero", "/dev/urandom"} {
		if err := os.Symlink(dev, filepath.Join(dir, filepath.Base(dev)+".yaml")); err != nil {
			t.Fatal(err)
		}
	}
	var out, errOut bytes.Buffer
	done := make(chan int, 1)
	go func() { done <- Main([]string{dir}, file.Limits{}, &out, &errOut) }()
	select {
	case code := <-done:
		if code != 1 {
			t.Fatalf("exit %d, want 1", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("validate did not finish within 10s")
	}
	for _, want := range []string{"pipe.yaml: cannot parse: not a regular file: it is a FIFO (named pipe)", "zero.yaml: cannot parse: not a regular file: it is a character device", "urandom.yaml: cannot parse: not a regular file: it is a character device"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if !strings.Contains(errOut.String(), "4 files, 1 resources, 3 problems") {
		t.Errorf("summary: %s", errOut.String())
	}
}

// Issue #11 item 5: validate applies the daemon's limits.
func TestValidateLimits(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "a.yaml", strings.NewReplacer("NAME", "a", "PORT", "80").Replace(se))
	var out, errOut bytes.Buffer
	if code := Main([]string{dir}, file.Limits{MaxNodes: 10}, &out, &errOut); code != 1 || !strings.Contains(out.String(), "more than 10 YAML nodes (maxNodes)") {
		t.Fatalf("exit %d: %s", code, out.String())
	}
}
