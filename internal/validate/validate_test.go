package validate

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
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
	if code := Main([]string{dir}, &out, &errOut); code != 0 || out.Len() != 0 {
		t.Fatalf("good dir: exit %d, output %q", code, out.String())
	}
	bad := write(t, dir, "sub/b.yaml", strings.NewReplacer("NAME", "b", "PORT", "70000").Replace(se))
	dup := write(t, dir, "c.yaml", "# a comment\n"+good)
	write(t, dir, ".hidden.yaml", "not: [valid")
	out.Reset()
	if code := Main([]string{dir}, &out, &errOut); code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := []*regexp.Regexp{
		regexp.MustCompile("^" + regexp.QuoteMeta(dup) + `:2: ServiceEntry/ns/a: duplicate: already defined in .*a\.yaml:1$`),
		regexp.MustCompile("^" + regexp.QuoteMeta(bad) + `:1: ServiceEntry/ns/b: .*spec\.ports\[0\]\.number`),
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
	if code := Main([]string{filepath.Join(dir, "nope")}, &out, &errOut); code != 2 {
		t.Fatalf("missing path: exit %d, want 2", code)
	}
}
