package agent

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/baremesh/baremesh/core/testkit"
	"github.com/baremesh/baremesh/nodeagent/nstest"
)

// TestStandaloneTunnel: a tunnel.yaml's tunnel is built in the
// namespaces named there (vxlan; see nodeagent/tunnel for traffic): up
// builds both ends, a second up (a new process: no record of the last
// apply) finds them in place, down removes them; run (KeepTunnel) keeps
// the tunnel until stopped, then removes it.
func TestStandaloneTunnel(t *testing.T) {
	nstest.RequireRoot(t)
	node, proxy := nstest.New(t), nstest.New(t)
	nstest.Link(t, node, []string{"10.201.2.1/24"}, proxy, []string{"10.201.2.2/24"})
	tf, err := LoadTunnelFile(writeFile(t, fmt.Sprintf(`kind: vxlan
nodeUnderlay: 10.201.2.1
proxyUnderlay: 10.201.2.2
podCIDRs: [10.201.1.0/24]
nodeNetns: %s
proxyNetns: %s
interval: 100ms
`, node.Name, proxy.Name)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	up := func() []string {
		t.Helper()
		tun, err := StandaloneTunnel(ctx, discard(), tf)
		if err != nil {
			t.Fatal(err)
		}
		changed, err := tun.Ensure(ctx)
		if err != nil {
			t.Fatalf("up: %v (changed %q)", err, changed)
		}
		return changed
	}
	if changed := strings.Join(up(), "\n"); !strings.Contains(changed, "node: link bmtun0 added") {
		t.Fatalf("up changed %q", changed)
	}
	if got := node.Run(t, "ip", "-d", "link", "show", "bmtun0"); !strings.Contains(got, "vxlan id 1000") {
		t.Errorf("node bmtun0: %s", got)
	}
	if changed := strings.Join(up(), "\n"); strings.Contains(changed, "link") || strings.Contains(changed, "rule") {
		t.Errorf("second up changed %q", changed)
	}
	tun, err := StandaloneTunnel(ctx, discard(), tf)
	if err != nil {
		t.Fatal(err)
	}
	if err := tun.Remove(ctx); err != nil {
		t.Fatalf("down: %v", err)
	}
	if _, err := proxy.Try("ip", "link", "show", "bmtun0"); err == nil {
		t.Error("proxy bmtun0 left after down")
	}

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- KeepTunnel(runCtx, discard(), tun, tf.Interval) }()
	testkit.Eventually(t, "run builds both ends", func() bool {
		_, perr := proxy.Try("ip", "link", "show", "bmtun0")
		_, nerr := node.Try("ip", "link", "show", "bmtun0")
		return perr == nil && nerr == nil
	})
	node.Run(t, "ip", "link", "del", "bmtun0")
	testkit.Eventually(t, "run puts back a removed end", func() bool {
		_, err := node.Try("ip", "link", "show", "bmtun0")
		return err == nil
	})
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute): // a hang guard, not a bound on speed
		t.Fatal("run did not return after it was stopped")
	}
	if _, err := node.Try("ip", "link", "show", "bmtun0"); err == nil {
		t.Error("node bmtun0 left after run stopped")
	}
}
