package chaos

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/baremesh/baremesh/core/identity"
	"github.com/baremesh/baremesh/nodeagent/nstest"
)

// TestRollingUpgrade (issue #32 item 2): three replicas of the previous
// release with proxies on the TLS port are upgraded to this one replica
// by replica (a clean stop, the new binary on the same state); after each
// step the mixed cluster must agree (nothing lost, duplicated or stale,
// tokens and CA kept). Then a downgrade of one replica to the previous
// release (whose formats are this one's: it works), and this release on
// a state directory of a later format, which must refuse to start with
// an error naming it, leaving it untouched.
//
// The previous release is UPGRADE_FROM (a commit), by default the parent
// of the commit that added core/cluster/direct.go (the last before this
// wave's cluster and format changes), exported with git archive into the
// test's temporary directory and built there (git archive rather than a
// worktree: it leaves the repository's own state alone).
// CHAOS_PROXIES sets the number of proxies (default 60). Run by
// CHAOS_UPGRADE=1 or CHAOS_FULL=1 (make chaos), not by make test.
func TestRollingUpgrade(t *testing.T) {
	if os.Getenv("CHAOS_UPGRADE") == "" && os.Getenv("CHAOS_FULL") == "" {
		t.Skip("set CHAOS_UPGRADE=1 (or CHAOS_FULL=1, make chaos) to run the rolling upgrade: it builds the previous release, minutes on a busy machine")
	}
	nstest.RequireRoot(t)
	nstest.RequireBinary(t, "iptables")
	nstest.RequireBinary(t, "git")
	proxies := 60
	if s := os.Getenv("CHAOS_PROXIES"); s != "" {
		fmt.Sscan(s, &proxies)
	}
	from := os.Getenv("UPGRADE_FROM")
	if from == "" {
		out, err := exec.Command("git", "log", "--diff-filter=A", "--format=%H", "--", "../../core/cluster/direct.go").Output()
		added := strings.Fields(string(out))
		if err != nil || len(added) == 0 {
			t.Skipf("skipping: cannot find the previous release (git log: %v); set UPGRADE_FROM", err)
		}
		from = added[len(added)-1] + "^"
	}
	prev := buildAt(t, from)
	cur := buildDaemon(t)
	f := startFleet(t, []string{prev, prev, prev}, proxies, 2*time.Minute)
	rs := f.rs
	f.mint(0)
	f.converge("previous release ×3 ("+shortRev(t, from)+")", time.Now())
	f.base = f.rows[0].use

	for i, r := range rs {
		f.spread()
		r.stop()
		r.bin = cur
		r.start(t)
		r.waitReady(t)
		f.mint(i)
		f.converge(fmt.Sprintf("%s upgraded (%d of 3 new)", r.name, i+1), time.Now())
	}

	// Downgrade cp-a to the previous release: its formats are this
	// release's (no format newer than it reads), so it works.
	f.spread()
	rs[0].stop()
	rs[0].bin = prev
	rs[0].start(t)
	rs[0].waitReady(t)
	f.converge("cp-a downgraded to the previous release", time.Now())
	rs[0].stop()
	rs[0].bin = cur
	rs[0].start(t)
	rs[0].waitReady(t)
	f.converge("cp-a upgraded again", time.Now())

	// This release on a directory of a later format (as a later release
	// would leave it): refused, named, untouched.
	rs[1].stop()
	formatFile := filepath.Join(rs[1].state, identity.StateFormatFile)
	later := []byte(`{"format": 2}` + "\n")
	if err := os.WriteFile(formatFile, later, 0o600); err != nil {
		t.Fatal(err)
	}
	tokens, _ := os.ReadFile(filepath.Join(rs[1].state, "tokens", identity.TokenFile))
	rs[1].start(t)
	st := rs[1].exited(t)
	log := rs[1].tail()
	if st.Success() || !strings.Contains(log, "format 2") || !strings.Contains(log, "later baremesh") {
		t.Errorf("this release on a format-2 state directory: exit %v, log:\n%s\nwant a refusal naming the format and a later release", st, log)
	}
	if b, _ := os.ReadFile(formatFile); string(b) != string(later) {
		t.Errorf("%s rewritten: %s", formatFile, b)
	}
	if b, _ := os.ReadFile(filepath.Join(rs[1].state, "tokens", identity.TokenFile)); string(b) != string(tokens) {
		t.Errorf("tokens.json changed by the refused start")
	}
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "later baremesh") {
			t.Logf("downgrade refused: %s", line)
		}
	}
	if err := os.WriteFile(formatFile, []byte(`{"format": 1}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rs[1].start(t)
	rs[1].waitReady(t)
	f.converge("cp-b back after the refused start", time.Now())

	report := "rolling upgrade from " + shortRev(t, from) + "\n" + f.table(proxies)
	t.Log("\n" + report)
	if file := os.Getenv("UPGRADE_REPORT"); file != "" {
		_ = os.WriteFile(file, []byte(report), 0o644)
	}
	for _, row := range f.rows {
		if !row.converged || row.lost+row.dup+row.stale+row.tokensLost+row.caLost > 0 {
			t.Errorf("%s: converged=%v lost=%d duplicate=%d stale=%d tokens lost=%d CA lost=%d", row.fault, row.converged, row.lost, row.dup, row.stale, row.tokensLost, row.caLost)
		}
	}
}

// buildAt builds baremeshd of commit rev (exported with git archive).
func buildAt(t *testing.T, rev string) string {
	t.Helper()
	src := filepath.Join(t.TempDir(), "src")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Fatalf("git rev-parse --show-toplevel: %v", err)
	}
	// From the top: in a subdirectory git archive exports only that.
	archive := exec.Command("sh", "-c", fmt.Sprintf("git archive --format=tar %q | tar -x -C %q", rev, src))
	archive.Dir = strings.TrimSpace(string(top))
	if out, err := archive.CombinedOutput(); err != nil {
		t.Fatalf("git archive %s: %v: %s", rev, err, out)
	}
	bin := filepath.Join(t.TempDir(), "baremeshd-prev")
	build := exec.Command("go", "build", "-o", bin, "./cmd/baremeshd")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build baremeshd at %s: %v\n%s", rev, err, out)
	}
	return bin
}

func shortRev(t *testing.T, rev string) string {
	out, err := exec.Command("git", "rev-parse", "--short", rev).Output()
	if err != nil {
		return rev
	}
	return strings.TrimSpace(string(out))
}
