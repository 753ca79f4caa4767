package cni

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/containernetworking/cni/libcni"

	"github.com/baremesh/baremesh/nodeagent/iptables"
	"github.com/baremesh/baremesh/nodeagent/nstest"
	"github.com/baremesh/baremesh/nodeagent/tunnel"
)

// link connects the node to another namespace with a veth pair.
func link(t *testing.T, node *nstest.NS, nodeIf, nodeAddr string, peer *nstest.NS, peerAddr string) {
	t.Helper()
	if out, err := exec.Command("ip", "link", "add", nodeIf, "netns", node.Name, "type", "veth", "peer", "name", "eth0", "netns", peer.Name).CombinedOutput(); err != nil {
		t.Fatalf("veth %s: %v: %s", nodeIf, err, out)
	}
	node.Run(t, "ip", "addr", "add", nodeAddr, "dev", nodeIf)
	node.Run(t, "ip", "link", "set", nodeIf, "up")
	peer.Run(t, "ip", "addr", "add", peerAddr, "dev", "eth0")
	peer.Run(t, "ip", "link", "set", "eth0", "up")
}

// pollBanner dials addr from ns until the banner starts with want.
func pollBanner(t *testing.T, ns *nstest.NS, addr, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := ns.Banner("tcp4", addr)
		if err == nil && strings.HasPrefix(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("dial %s from %s: %q, %v; want prefix %q", addr, ns.Name, got, err, want)
		}
		time.Sleep(50 * time.Millisecond) // polling interval
	}
}

// TestChainedAmbientEnrolment: the node tunnel runs with no PodCIDRs; an
// ambient pod's ADD (libcni, bridge + host-local + ours) enrols its IP in
// the node's namespace, so the pod's traffic reaches the node proxy's
// transparent listener; the pod's namespace gets no rules; DEL removes
// the enrolment.
func TestChainedAmbientEnrolment(t *testing.T) {
	n := newNode(t, fmt.Sprintf(`,"ambientEnabled":true,"enrolLock":%q`, filepath.Join(t.TempDir(), "enrol.lock")))
	proxy, outside := nstest.New(t), nstest.New(t)
	link(t, n.ns, "ztun0", "10.200.2.1/24", proxy, "10.200.2.2/24")
	link(t, n.ns, "out0", "10.200.3.1/24", outside, "10.200.3.2/24")
	outside.Run(t, "ip", "route", "add", "default", "via", "10.200.3.1")
	n.ns.Run(t, "sysctl", "-qw", "net.ipv4.ip_forward=1")
	outside.Serve(t, "tcp4", "10.200.3.2:8080", "outside", nstest.ServerOptions{})
	proxy.Serve(t, "tcp4", "0.0.0.0:15008", "ztunnel", nstest.ServerOptions{Transparent: true})

	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	tun, err := tunnel.New(log, tunnel.Config{Kind: tunnel.KindVXLAN, NodeUnderlay: netip.MustParseAddr("10.200.2.1"),
		ProxyUnderlay: netip.MustParseAddr("10.200.2.2")}, n.ns.Name, proxy.Name, iptables.BackendNFT)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if changed, err := tun.Ensure(ctx); err != nil {
		t.Fatalf("tunnel Ensure: %v (%v)", err, changed)
	}
	t.Cleanup(func() { _ = tun.Remove(ctx) })

	if _, err := n.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "mesh",
		Labels: map[string]string{LabelDataplaneMode: "ambient"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createPod(t, n.kube, "mesh", "amb-1", false, nil)
	other := nstest.New(t)
	createPod(t, n.kube, "plain", "direct-1", false, nil)
	pod := nstest.New(t)
	res, err := n.add(pod, "mesh", "amb-1")
	if err != nil {
		t.Fatalf("ADD: %v", err)
	}
	ip := podIP(t, res)
	if _, err := n.add(other, "plain", "direct-1"); err != nil {
		t.Fatalf("ADD (not ambient): %v", err)
	}
	if k := ourRules(t, pod); k != 0 {
		t.Errorf("%d rules in the ambient pod's namespace; want none", k)
	}
	en := &tunnel.Enroller{Backend: iptables.BackendNFT, NetNS: n.ns.Name}
	if got, err := en.Enrolled(ctx); err != nil || len(got) != 1 || got[0].String() != ip {
		t.Fatalf("enrolled after ADD: %v, %v; want [%s]", got, err, ip)
	}
	pollBanner(t, pod, "10.200.3.2:8080", "ztunnel orig=10.200.3.2:8080 src="+ip+":")
	pollBanner(t, other, "10.200.3.2:8080", "outside orig=10.200.3.2:8080")

	n.del(t, pod, "mesh", "amb-1")
	if got, err := en.Enrolled(ctx); err != nil || len(got) != 0 {
		t.Errorf("enrolled after DEL: %v, %v; want none", got, err)
	}

	// A runtime speaking CNI 0.3.1 sends DEL without prevResult: the pod
	// is still unenrolled (by its container ID).
	createPod(t, n.kube, "mesh", "amb-2", false, nil)
	pod2 := nstest.New(t)
	if _, err := n.add(pod2, "mesh", "amb-2"); err != nil {
		t.Fatalf("ADD amb-2: %v", err)
	}
	old, err := libcni.ConfListFromBytes(bytes.Replace(n.list.Bytes, []byte(`"cniVersion":"1.0.0"`), []byte(`"cniVersion":"0.3.1"`), 1))
	if err != nil {
		t.Fatal(err)
	}
	if err := n.do(func(rt *libcni.RuntimeConf) error { return n.cni.DelNetworkList(ctx, old, rt) }, pod2, "mesh", "amb-2"); err != nil {
		t.Errorf("DEL (CNI 0.3.1, no prevResult): %v", err)
	}
	if got, err := en.Enrolled(ctx); err != nil || len(got) != 0 {
		t.Errorf("enrolled after a DEL without prevResult: %v, %v; want none", got, err)
	}

	// A pod whose sandbox goes without a DEL is swept by the tunnel's
	// next pass.
	createPod(t, n.kube, "mesh", "amb-3", false, nil)
	gone := &nstest.NS{Name: fmt.Sprintf("bmt-gone-%d", os.Getpid())}
	if out, err := exec.Command("ip", "netns", "add", gone.Name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", gone.Name).Run() }) // already gone when the test passes
	if _, err := n.add(gone, "mesh", "amb-3"); err != nil {
		t.Fatalf("ADD amb-3: %v", err)
	}
	if got, err := en.Enrolled(ctx); err != nil || len(got) != 1 {
		t.Fatalf("enrolled after ADD amb-3: %v, %v", got, err)
	}
	if out, err := exec.Command("ip", "netns", "del", gone.Name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns del: %v: %s", err, out)
	}
	changed, err := tun.Ensure(ctx)
	if err != nil || !strings.Contains(strings.Join(changed, ";"), "swept stale enrolments") {
		t.Errorf("tunnel Ensure after a pod went without DEL: %v, %v; want a sweep", changed, err)
	}
	if got, err := en.Enrolled(ctx); err != nil || len(got) != 0 {
		t.Errorf("enrolled after the sweep: %v, %v; want none", got, err)
	}
}
