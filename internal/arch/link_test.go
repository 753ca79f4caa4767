package arch

import (
	"os/exec"
	"strings"
	"testing"
)

// notLinked lists, per command, packages of ours its binary must not link
// (the transitive closure of its non-test imports). baremeshctl reads the
// daemon's config (internal/daemonconfig) but must not carry the daemon
// itself: with it, the binary was 1,073 packages and 87 MB, without it 441
// and 43 MB (issue #31). baremesh-agent is the node agent's main and
// links the node agent alone (nodeagent stands alone, talking to the
// control plane over the wire).
var notLinked = map[string][]string{
	"cmd/baremeshctl":    {"internal/daemon", "sources/kube", "xdsserver/ads"},
	"cmd/baremesh-agent": {"core", "sources", "xdsserver", "internal/daemon", "internal/daemonconfig", "internal/ctl"},
}

func TestCommandsDoNotLink(t *testing.T) {
	for cmd, bad := range notLinked {
		out, err := exec.Command("go", "list", "-deps", module+cmd).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps ./%s: %v\n%s", cmd, err, out)
		}
		deps := strings.Fields(string(out))
		if len(deps) < 10 {
			t.Fatalf("go list -deps ./%s listed only %d packages; is the command right?", cmd, len(deps))
		}
		for _, d := range deps {
			rel, ours := strings.CutPrefix(d, module)
			if !ours {
				continue
			}
			for _, b := range bad {
				if rel == b || strings.HasPrefix(rel, b+"/") {
					t.Errorf("%s links %s (must not: %s)", cmd, d, b)
				}
			}
		}
	}
}
