package tunnel

import (
	"context"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/baremesh/baremesh/nodeagent/iptables"
	"github.com/baremesh/baremesh/nodeagent/nstest"
)

// TestEnrolTrafficIPv6: with ipv6, an enrolled IPv6 pod's connections go
// through the tunnel (over the IPv4 underlay) to the proxy's transparent
// listener with their original destination, the IPv4 path keeps working,
// and Unenroll sends the pod direct again.
func TestEnrolTrafficIPv6(t *testing.T) {
	for _, kind := range []Kind{KindVXLAN, KindGeneve} {
		t.Run(string(kind), func(t *testing.T) {
			if kind == KindGeneve {
				if out, err := nstest.New(t).Try("ip", "link", "add", "g0", "type", "geneve", "id", "1", "remote", "10.0.0.1"); err != nil {
					t.Skipf("skipping: the kernel has no geneve: %s", strings.TrimSpace(out))
				}
			}
			tp := newTopology(t, kind)
			for _, a := range []struct {
				ns   *nstest.NS
				dev  string
				addr string
			}{{tp.node, "pod0", "fd20:1::1/64"}, {tp.pod, "eth0", "fd20:1::2/64"}, {tp.node, "out0", "fd20:3::1/64"}, {tp.outside, "eth0", "fd20:3::2/64"}} {
				a.ns.Run(t, "ip", "addr", "add", a.addr, "dev", a.dev, "nodad")
			}
			tp.pod.Run(t, "ip", "-6", "route", "add", "default", "via", "fd20:1::1")
			tp.outside.Run(t, "ip", "-6", "route", "add", "default", "via", "fd20:3::1")
			tp.node.Run(t, "sysctl", "-qw", "net.ipv6.conf.all.forwarding=1")
			tp.outside.Serve(t, "tcp6", "[fd20:3::2]:8080", "outside6", nstest.ServerOptions{})
			// The proxy's "tcp" listener on 0.0.0.0:15008 is dual-stack.
			tp.cfg.IPv6 = true
			tp.cfg.PodCIDRs = nil
			log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
			tun, err := New(log, tp.cfg, tp.node.Name, tp.proxy.Name, iptables.BackendNFT)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if changed, err := tun.Ensure(ctx); err != nil {
				t.Fatalf("Ensure: %v (changed %v)", err, changed)
			}
			t.Cleanup(func() { _ = tun.Remove(ctx) })
			if changed, err := tun.Ensure(ctx); err != nil || len(changed) != 0 {
				t.Errorf("second Ensure changed %v, %v", changed, err)
			}
			banner6 := func(want string) {
				t.Helper()
				deadline := time.Now().Add(10 * time.Second)
				for {
					got, err := tp.pod.Banner("tcp6", "[fd20:3::2]:8080")
					if err == nil && strings.HasPrefix(got, want) {
						return
					}
					if time.Now().After(deadline) {
						t.Fatalf("pod -> [fd20:3::2]:8080: got %q, %v; want %q...", got, err, want)
					}
					time.Sleep(50 * time.Millisecond) // polling interval
				}
			}
			banner6("outside6 orig=[fd20:3::2]:8080 src=[fd20:1::2]:")
			en := &Enroller{Backend: iptables.BackendNFT, NetNS: tp.node.Name, LockPath: filepath.Join(t.TempDir(), "enrol.lock")}
			owner, err := Owner("c-pod6", "/var/run/netns/"+tp.pod.Name)
			if err != nil {
				t.Fatal(err)
			}
			for _, ip := range []string{"fd20:1::2", "10.200.1.2"} {
				if err := en.EnrollOwned(ctx, netip.MustParseAddr(ip), owner); err != nil {
					t.Fatalf("EnrollOwned %s: %v", ip, err)
				}
			}
			banner6("ztunnel orig=[fd20:3::2]:8080 src=[fd20:1::2]:")
			expectBanner(t, tp.pod, "ztunnel orig=10.200.3.2:8080 src=10.200.1.2:")
			if got, err := en.Enrolled(ctx); err != nil || len(got) != 2 {
				t.Errorf("Enrolled = %v, %v; want both addresses", got, err)
			}
			if err := en.UnenrollContainer(ctx, "c-pod6"); err != nil {
				t.Fatal(err)
			}
			banner6("outside6 orig=[fd20:3::2]:8080")
			expectBanner(t, tp.pod, "outside orig=10.200.3.2:8080")
		})
	}
}
