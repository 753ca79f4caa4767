package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/baremesh/baremesh/nodeagent/nstest"
)

// TestTunnelUpDown: the command reads its YAML, builds both ends in the
// namespaces named there (vxlan; see nodeagent/tunnel for traffic) and
// removes them.
func TestTunnelUpDown(t *testing.T) {
	nstest.RequireRoot(t)
	node, proxy := nstest.New(t), nstest.New(t)
	nstest.Link(t, node, []string{"10.201.2.1/24"}, proxy, []string{"10.201.2.2/24"})
	cfg := writeConfig(t, fmt.Sprintf(`kind: vxlan
nodeUnderlay: 10.201.2.1
proxyUnderlay: 10.201.2.2
podCIDRs: [10.201.1.0/24]
nodeNetns: %s
proxyNetns: %s
`, node.Name, proxy.Name))
	code, out, stderr := runMain(t, "tunnel", "up", "-config", cfg)
	if code != 0 || !strings.Contains(out, "node: link bmtun0 added") {
		t.Fatalf("tunnel up: exit %d, %q, %s", code, out, stderr)
	}
	if got := node.Run(t, "ip", "-d", "link", "show", "bmtun0"); !strings.Contains(got, "vxlan id 1000") {
		t.Errorf("node bmtun0: %s", got)
	}
	// A new process re-applies its iptables payload (it has no record of
	// the last apply) but finds links, addresses, routes and rules in place.
	if code, out, stderr := runMain(t, "tunnel", "up", "-config", cfg); code != 0 || strings.Contains(out, "link") || strings.Contains(out, "rule") {
		t.Errorf("second up: exit %d, changed %q, %s", code, out, stderr)
	}
	if code, _, stderr := runMain(t, "tunnel", "down", "-config", cfg); code != 0 {
		t.Fatalf("tunnel down: exit %d, %s", code, stderr)
	}
	if _, err := proxy.Try("ip", "link", "show", "bmtun0"); err == nil {
		t.Error("proxy bmtun0 left after down")
	}
	if code, _, stderr := runMain(t, "tunnel", "up", "-config", writeConfig(t, "kind: gre\n")); code != 1 || !strings.Contains(stderr, "kind") {
		t.Errorf("bad config: exit %d, %s", code, stderr)
	}
}
