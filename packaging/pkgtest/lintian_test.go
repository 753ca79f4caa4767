package pkgtest

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLintian: no errors on either .deb; warnings are logged.
func TestLintian(t *testing.T) {
	needRoot(t, "lintian", "make")
	p := buildPackages(t, currentVersion(t))
	out, err := exec.Command("lintian", "--tag-display-limit", "0", p.Deb, p.AgentDeb).CombinedOutput()
	var errs, warns []string
	for _, l := range strings.Split(string(out), "\n") {
		switch {
		case strings.HasPrefix(l, "E: "):
			errs = append(errs, l)
		case strings.HasPrefix(l, "W: "):
			warns = append(warns, l)
		}
	}
	t.Logf("lintian warnings (%d):\n%s", len(warns), strings.Join(warns, "\n"))
	if len(errs) > 0 || (err != nil && len(warns) == 0) {
		t.Fatalf("lintian errors (%v):\n%s", err, out)
	}
}
