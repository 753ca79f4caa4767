package agent

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/baremesh/baremesh/core/testkit"
	"github.com/baremesh/baremesh/nodeagent/nstest"
)

// TestAgentRunsTunnelAndRepair: agent.yaml with tunnel: and repair:
// enabled runs both as components with status on /status; stopping the
// agent removes the tunnel. The repair controller's API server is
// unreachable here: it shows as running with nothing checked.
func TestAgentRunsTunnelAndRepair(t *testing.T) {
	nstest.RequireRoot(t)
	nstest.RequireBinary(t, "iptables-nft-restore")
	node, proxy := nstest.New(t), nstest.New(t)
	if out, err := exec.Command("ip", "link", "add", "ztun0", "netns", node.Name, "type", "veth", "peer", "name", "eth0", "netns", proxy.Name).CombinedOutput(); err != nil {
		t.Fatalf("veth: %v: %s", err, out)
	}
	node.Run(t, "ip", "addr", "add", "10.200.2.1/24", "dev", "ztun0")
	node.Run(t, "ip", "link", "set", "ztun0", "up")
	proxy.Run(t, "ip", "addr", "add", "10.200.2.2/24", "dev", "eth0")
	proxy.Run(t, "ip", "link", "set", "eth0", "up")
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "http://127.0.0.1:1"}}]
users: [{name: u, user: {}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Parse("test.yaml", []byte(`
capture: {disabled: true}
tunnel: {enabled: true, kind: vxlan, backend: nft, nodeUnderlay: 10.200.2.1, proxyUnderlay: 10.200.2.2,
  nodeNetns: `+node.Name+`, proxyNetns: `+proxy.Name+`}
repair: {enabled: true, node: node-1, mode: delete, kubeconfig: `+kubeconfig+`}
statusAddress: 127.0.0.1:0
interval: 100ms
`))
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(context.Background(), discard(), cfg, Options{Notify: func(string) {}})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- a.Run(ctx) }()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			<-errc
		}
	}
	defer stop()

	addr := a.StatusAddr()
	testkit.Eventually(t, "tunnel and repair in /status", func() bool {
		d, _ := getStatus(t, addr)
		return strings.HasPrefix(d.reason("tunnel"), "Ready: ") &&
			strings.HasPrefix(d.reason("repair"), "Ready: running: 0 pod events checked")
	})
	if _, err := node.Try("ip", "link", "show", "bmtun0"); err != nil {
		t.Errorf("no tunnel device in the node namespace: %v", err)
	}
	stop()
	if _, err := node.Try("ip", "link", "show", "bmtun0"); err == nil {
		t.Error("tunnel device left after the agent stopped")
	}
}
