package tunnel

import (
	"context"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/baremesh/baremesh/core/testkit"
	"github.com/baremesh/baremesh/nodeagent/iptables"
	"github.com/baremesh/baremesh/nodeagent/nstest"
)

func TestMain(m *testing.M) {
	nstest.MaybeHelper()
	testkit.Main(func() int {
		code := m.Run()
		nstest.Cleanup()
		return code
	})
}

// veth connects a and b with a veth pair of the given names and addresses.
func veth(t *testing.T, a *nstest.NS, aName, aAddr string, b *nstest.NS, bName, bAddr string) {
	t.Helper()
	if out, err := exec.Command("ip", "link", "add", aName, "netns", a.Name, "type", "veth", "peer", "name", bName, "netns", b.Name).CombinedOutput(); err != nil {
		t.Fatalf("veth %s/%s: %v: %s", a.Name, b.Name, err, out)
	}
	a.Run(t, "ip", "addr", "add", aAddr, "dev", aName)
	a.Run(t, "ip", "link", "set", aName, "up")
	b.Run(t, "ip", "addr", "add", bAddr, "dev", bName)
	b.Run(t, "ip", "link", "set", bName, "up")
}

// probeGeneve tries to create a geneve link in a scratch namespace.
func probeGeneve(t *testing.T) error {
	ns := nstest.New(t)
	_, err := ns.Try("ip", "link", "add", "gprobe", "type", "geneve", "id", "1", "remote", "192.0.2.1")
	return err
}

// topology: pod (10.200.1.2) -- node -- outside (10.200.3.2:8080), and
// node (10.200.2.1) -- proxy (10.200.2.2) as the tunnel's underlay. The
// outside server and the proxy's transparent listener answer with their
// name and the destination the connection had.
type topology struct {
	node, pod, proxy, outside *nstest.NS
	cfg                       Config
}

func newTopology(t *testing.T, kind Kind) topology {
	nstest.RequireRoot(t)
	nstest.RequireBinary(t, "iptables-nft-restore")
	tp := topology{node: nstest.New(t), pod: nstest.New(t), proxy: nstest.New(t), outside: nstest.New(t)}
	veth(t, tp.node, "pod0", "10.200.1.1/24", tp.pod, "eth0", "10.200.1.2/24")
	veth(t, tp.node, "ztun0", "10.200.2.1/24", tp.proxy, "eth0", "10.200.2.2/24")
	veth(t, tp.node, "out0", "10.200.3.1/24", tp.outside, "eth0", "10.200.3.2/24")
	tp.pod.Run(t, "ip", "route", "add", "default", "via", "10.200.1.1")
	tp.outside.Run(t, "ip", "route", "add", "default", "via", "10.200.3.1")
	tp.node.Run(t, "sysctl", "-qw", "net.ipv4.ip_forward=1")
	tp.outside.Serve(t, "tcp", "10.200.3.2:8080", "outside", nstest.ServerOptions{})
	tp.proxy.Serve(t, "tcp", "0.0.0.0:15008", "ztunnel", nstest.ServerOptions{Transparent: true})
	tp.cfg = Config{Kind: kind, NodeUnderlay: netip.MustParseAddr("10.200.2.1"), ProxyUnderlay: netip.MustParseAddr("10.200.2.2"),
		PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.200.1.0/24")}}
	return tp
}

// expectBanner polls the pod's connection to the outside address until
// the banner starts with want.
func expectBanner(t *testing.T, pod *nstest.NS, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := pod.Banner("tcp", "10.200.3.2:8080")
		if err == nil && strings.HasPrefix(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod -> 10.200.3.2:8080: got %q, %v; want %q...", got, err, want)
		}
		time.Sleep(50 * time.Millisecond) // polling interval
	}
}

func runTunnel(t *testing.T, kind Kind) {
	tp := newTopology(t, kind)
	expectBanner(t, tp.pod, "outside orig=10.200.3.2:8080 src=10.200.1.2:")

	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	tun, err := New(log, tp.cfg, tp.node.Name, tp.proxy.Name, iptables.BackendNFT)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	changed, err := tun.Ensure(ctx)
	if err != nil {
		t.Fatalf("Ensure: %v (changed %v)", err, changed)
	}
	// Redirected: the proxy's listener answers, seeing the pod as source
	// and the original destination as its local address.
	expectBanner(t, tp.pod, "ztunnel orig=10.200.3.2:8080 src=10.200.1.2:")

	if changed, err := tun.Ensure(ctx); err != nil || len(changed) != 0 {
		t.Errorf("second Ensure changed %v, %v; want nothing", changed, err)
	}
	// Drift: a deleted rule and a downed device come back.
	tp.node.Run(t, "ip", "rule", "del", "fwmark", "0x100/0x100", "lookup", "100")
	tp.proxy.Run(t, "ip", "link", "set", "bmtun0", "down")
	changed, err = tun.Ensure(ctx)
	if err != nil || len(changed) < 2 {
		t.Errorf("Ensure after drift changed %v, %v; want the rule and the link", changed, err)
	}
	expectBanner(t, tp.pod, "ztunnel orig=10.200.3.2:8080")

	if err := tun.Remove(ctx); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	expectBanner(t, tp.pod, "outside orig=10.200.3.2:8080 src=10.200.1.2:")
	for _, ns := range []*nstest.NS{tp.node, tp.proxy} {
		if out := ns.Run(t, "ip", "rule"); strings.Contains(out, "fwmark") || strings.Contains(out, "10.200.2.2") {
			t.Errorf("%s: rules left: %s", ns.Name, out)
		}
		if out := ns.Run(t, "iptables-nft-save", "-t", "mangle"); strings.Contains(out, "BMTUN") {
			t.Errorf("%s: chains left: %s", ns.Name, out)
		}
		if _, err := ns.Try("ip", "link", "show", "bmtun0"); err == nil {
			t.Errorf("%s: bmtun0 left", ns.Name)
		}
	}
	if err := tun.Remove(ctx); err != nil {
		t.Errorf("second Remove: %v", err)
	}
}

func TestTunnelVXLAN(t *testing.T) { runTunnel(t, KindVXLAN) }

func TestTunnelGeneve(t *testing.T) {
	nstest.RequireRoot(t)
	if err := probeGeneve(t); err != nil {
		t.Skipf("skipping: the kernel refuses a geneve link (%v); the vxlan test covers the same code path", strings.TrimSpace(err.Error()))
	}
	runTunnel(t, KindGeneve)
}
