package iptables

import (
	"context"
	"io"
	"log/slog"
	"net/netip"
	"regexp"
	"strings"
	"testing"

	"github.com/baremesh/baremesh/nodeagent/nstest"
)

// host is a "VM" namespace connected to a "peer" namespace, with one
// backend's iptables and an Applier working inside the VM namespace.
type host struct {
	vm, peer *nstest.NS
	backend  Backend
	runner   *ExecRunner
	applier  *Applier
	extra    *nstest.NS // a guest behind a virtual interface, when made
}

func newHost(t *testing.T, backend Backend, tproxy bool) *host {
	t.Helper()
	nstest.RequireRoot(t)
	nstest.RequireBinary(t, "iptables-"+string(backend)+"-restore")
	nstest.RequireBinary(t, "setpriv")
	h := &host{vm: nstest.New(t), peer: nstest.New(t), backend: backend}
	nstest.Link(t, h.vm, []string{"10.77.0.2/24", "fd77::2/64"}, h.peer, []string{"10.77.0.1/24", "10.88.0.1/24", "fd77::1/64"})
	h.vm.Run(t, "ip", "route", "add", "default", "via", "10.77.0.1")
	h.vm.Run(t, "ip", "-6", "route", "add", "default", "via", "fd77::1")
	h.runner = &ExecRunner{Backend: backend, NetNS: h.vm.Name}
	h.applier = NewApplier(slog.New(slog.NewTextHandler(io.Discard, nil)), ApplierOptions{
		Runner: h.runner, Router: &NetlinkRouter{NetNS: h.vm.Name}})

	// The VM: a test proxy on 15001/15006 and 15053 (no Envoy here: these
	// are small servers that report the original destination), and apps.
	for _, fam := range []struct{ network, any string }{{"tcp4", "0.0.0.0"}, {"tcp6", "[::]"}} {
		sfx := map[string]string{"tcp4": "", "tcp6": "/6"}[fam.network]
		h.vm.Serve(t, fam.network, fam.any+":15001", "proxy-out"+sfx, nstest.ServerOptions{})
		h.vm.Serve(t, fam.network, fam.any+":15006", "proxy-in"+sfx, nstest.ServerOptions{Transparent: tproxy})
		h.vm.Serve(t, fam.network, fam.any+":8080", "app8080"+sfx, nstest.ServerOptions{})
		h.peer.Serve(t, fam.network, fam.any+":9090", "peer9090"+sfx, nstest.ServerOptions{})
	}
	h.vm.Serve(t, "tcp4", "0.0.0.0:8081", "app8081", nstest.ServerOptions{})
	h.vm.Serve(t, "tcp4", "0.0.0.0:15021", "app15021", nstest.ServerOptions{})
	h.vm.Serve(t, "tcp4", "0.0.0.0:22", "sshd", nstest.ServerOptions{})
	h.peer.Serve(t, "tcp4", "0.0.0.0:5432", "peer5432", nstest.ServerOptions{})
	// Like the proxy's DNS listener, the resolver binds 127.0.0.1 (REDIRECT
	// of locally sent packets goes there, and replies must come from it)
	// and runs as the proxy's user (its UDP answers go in the apps' DNS
	// conntrack zone).
	h.vm.Start(t, 1337, 1337, "dnsforward", "127.0.0.1:15053", "127.0.0.53:53", ".", "10.53.0.1")
	h.peer.ServeDNS(t, "10.77.0.1:53", netip.MustParseAddr("10.53.0.2"))
	return h
}

// save returns iptables-save of both families without comments,
// counters, and tables that hold no rules and no chains of their own
// (an empty built-in table is not a rule; iptables cannot unload it).
func (h *host) save(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for _, f := range []Family{V4, V6} {
		out, err := h.runner.Save(context.Background(), f)
		if err != nil {
			t.Fatal(err)
		}
		for _, table := range strings.Split(out, "COMMIT\n") {
			var lines []string
			used := false
			for _, l := range strings.Split(table, "\n") {
				if l == "" || strings.HasPrefix(l, "#") {
					continue
				}
				l = counters.ReplaceAllString(l, "")
				used = used || strings.HasPrefix(l, "-A ") || (strings.HasPrefix(l, ":") && strings.HasSuffix(l, " -"))
				lines = append(lines, l)
			}
			if used {
				b.WriteString(strings.Join(lines, "\n") + "\nCOMMIT\n")
			}
		}
	}
	return b.String()
}

var counters = regexp.MustCompile(` \[\d+:\d+\]$`)

// expect dials from ns to addr and checks the banner starts with want.
func expect(t *testing.T, ns *nstest.NS, network, addr, want string) {
	t.Helper()
	got, err := ns.Banner(network, addr)
	if err != nil {
		t.Errorf("dial %s from %s: %v (want %q)", addr, ns.Name, err, want)
		return
	}
	if !strings.HasPrefix(got, want) {
		t.Errorf("dial %s: got %q, want prefix %q", addr, got, want)
	}
}

func expectDNS(t *testing.T, got netip.Addr, err error, want string) {
	t.Helper()
	if err != nil || got.String() != want {
		t.Errorf("dns answer %v, %v; want %s", got, err, want)
	}
}

func apply(t *testing.T, h *host, cfg Config) *Ruleset {
	t.Helper()
	rs, err := Render(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.applier.Apply(context.Background(), rs); err != nil {
		t.Fatalf("apply: %v", err)
	}
	return rs
}

var backends = []Backend{BackendNFT, BackendLegacy}

func TestTrafficRedirect(t *testing.T) {
	for _, b := range backends {
		t.Run(string(b), func(t *testing.T) {
			t.Parallel()
			h := newHost(t, b, false)
			// Rules of other software on the host must survive everything.
			h.vm.Run(t, "iptables-"+string(b), "-A", "INPUT", "-p", "tcp", "--dport", "9999", "-j", "ACCEPT")
			h.vm.Run(t, "iptables-"+string(b), "-t", "nat", "-N", "FOREIGN")
			h.vm.Run(t, "iptables-"+string(b), "-t", "nat", "-A", "FOREIGN", "-p", "udp", "-j", "RETURN")
			h.vm.Run(t, "iptables-"+string(b), "-t", "nat", "-A", "PREROUTING", "-j", "FOREIGN")
			before := h.save(t)

			// Connections open before capture must keep flowing directly.
			inOld, err := h.peer.Dial("tcp4", "10.77.0.2:8080")
			if err != nil {
				t.Fatal(err)
			}
			defer inOld.Close()
			outOld, err := h.vm.Dial("tcp4", "10.77.0.1:9090")
			if err != nil {
				t.Fatal(err)
			}
			defer outOld.Close()
			if l, _ := nstest.ReadLine(inOld); !strings.HasPrefix(l, "app8080") {
				t.Fatalf("before capture: %q", l)
			}
			if l, _ := nstest.ReadLine(outOld); !strings.HasPrefix(l, "peer9090") {
				t.Fatalf("before capture: %q", l)
			}

			cfg := Config{CaptureDNS: true, DNSServers: []string{"192.0.2.53"}, InboundPortsExclude: []int{8081}, OutboundPortsExclude: []int{5432},
				OutboundIPRangesExclude: []string{"10.88.0.0/24"}}
			apply(t, h, cfg)
			installed := h.save(t)
			apply(t, h, cfg)
			if again := h.save(t); again != installed {
				t.Errorf("second apply changed iptables-save:\n--- first\n%s\n--- second\n%s", installed, again)
			}

			// Inbound.
			expect(t, h.peer, "tcp4", "10.77.0.2:8080", "proxy-in orig=10.77.0.2:8080 src=10.77.0.1:")
			expect(t, h.peer, "tcp6", "[fd77::2]:8080", "proxy-in/6 orig=[fd77::2]:8080 src=[fd77::1]:")
			expect(t, h.peer, "tcp4", "10.77.0.2:8081", "app8081")   // excluded port
			expect(t, h.peer, "tcp4", "10.77.0.2:15021", "app15021") // never captured
			expect(t, h.peer, "tcp4", "10.77.0.2:22", "sshd")        // SSH never captured
			// Outbound.
			expect(t, h.vm, "tcp4", "10.77.0.1:9090", "proxy-out orig=10.77.0.1:9090 src=10.77.0.2:")
			expect(t, h.vm, "tcp6", "[fd77::1]:9090", "proxy-out/6 orig=[fd77::1]:9090 src=[fd77::2]:")
			expect(t, h.vm, "tcp4", "10.77.0.1:5432", "peer5432") // excluded port
			expect(t, h.vm, "tcp4", "10.88.0.1:9090", "peer9090") // excluded CIDR
			expect(t, h.vm, "tcp4", "127.0.0.1:8080", "app8080")  // loopback
			out, err := h.vm.RunAs(t, 1337, 1337, "banner", "tcp4", "10.77.0.1:9090")
			if err != nil || !strings.HasPrefix(out, "peer9090") {
				t.Errorf("outbound as uid 1337: %q, %v; want it to bypass capture", out, err)
			}
			out, err = h.vm.RunAs(t, 4242, 1337, "banner", "tcp4", "10.77.0.1:9090")
			if err != nil || !strings.HasPrefix(out, "peer9090") {
				t.Errorf("outbound as gid 1337: %q, %v; want it to bypass capture", out, err)
			}
			out, err = h.vm.RunAs(t, 4242, 4242, "banner", "tcp4", "10.77.0.1:9090")
			if err != nil || !strings.HasPrefix(out, "proxy-out") {
				t.Errorf("outbound as uid 4242: %q, %v; want it captured", out, err)
			}
			// DNS to a captured server is answered by the resolver on
			// 15053, except the proxy's own upstream queries; DNS to other
			// servers is not captured.
			a, err := h.vm.Resolve("udp", "192.0.2.53:53", "svc.example.")
			expectDNS(t, a, err, "10.53.0.1")
			a, err = h.vm.Resolve("tcp", "192.0.2.53:53", "svc.example.")
			expectDNS(t, a, err, "10.53.0.1")
			out, err = h.vm.RunAs(t, 1337, 1337, "dns", "udp", "10.77.0.1:53", "upstream.example.")
			if err != nil || out != "10.53.0.2" {
				t.Errorf("proxy's upstream DNS query: %q, %v; want the peer's answer 10.53.0.2", out, err)
			}
			a, err = h.vm.Resolve("udp", "10.77.0.1:53", "svc.example.")
			expectDNS(t, a, err, "10.53.0.2")
			// Established connections were never redirected.
			for name, c := range map[string]interface {
				Write([]byte) (int, error)
			}{"app8080": inOld, "peer9090": outOld} {
				if _, err := c.Write([]byte("still there\n")); err != nil {
					t.Errorf("%s: write on old connection: %v", name, err)
				}
			}
			if l, err := nstest.ReadLine(inOld); l != "app8080 echo still there" {
				t.Errorf("old inbound connection after capture: %q, %v", l, err)
			}
			if l, err := nstest.ReadLine(outOld); l != "peer9090 echo still there" {
				t.Errorf("old outbound connection after capture: %q, %v", l, err)
			}

			// Drift: a rule deleted by hand is noticed and put back.
			h.vm.Run(t, "iptables-"+string(b), "-t", "nat", "-D", "OUTPUT", "-j", "BAREMESH_OUTPUT")
			expect(t, h.vm, "tcp4", "10.77.0.1:9090", "peer9090")
			d, err := h.applier.Repair(context.Background())
			if err != nil || len(d.Families) != 1 || d.Families[0] != V4 {
				t.Errorf("Repair = %+v, %v; want ipv4 drift", d, err)
			}
			if got := h.save(t); got != installed {
				t.Errorf("after repair:\n%s\nwant:\n%s", got, installed)
			}
			expect(t, h.vm, "tcp4", "10.77.0.1:9090", "proxy-out")
			if d, err := h.applier.Check(context.Background()); err != nil || d.Any() {
				t.Errorf("Check after repair = %+v, %v", d, err)
			}

			// Uninstall: traffic flows directly and the host is as before.
			if err := h.applier.Uninstall(context.Background(), DefaultChainPrefix, nil); err != nil {
				t.Fatal(err)
			}
			if after := h.save(t); after != before {
				t.Errorf("uninstall left the host different:\n--- before\n%s\n--- after\n%s", before, after)
			}
			expect(t, h.peer, "tcp4", "10.77.0.2:8080", "app8080")
			expect(t, h.peer, "tcp6", "[fd77::2]:8080", "app8080/6")
			expect(t, h.vm, "tcp4", "10.77.0.1:9090", "peer9090")
			a, err = h.vm.Resolve("udp", "10.77.0.1:53", "svc.example.")
			expectDNS(t, a, err, "10.53.0.2")
		})
	}
}

func TestTrafficTProxy(t *testing.T) {
	for _, b := range backends {
		t.Run(string(b), func(t *testing.T) {
			t.Parallel()
			h := newHost(t, b, true)
			before := h.save(t)
			cfg := Config{Mode: ModeTProxy, InboundPortsExclude: []int{8081}}
			rs := apply(t, h, cfg)
			installed := h.save(t)
			apply(t, h, cfg)
			if again := h.save(t); again != installed {
				t.Errorf("second apply changed iptables-save:\n%s\nvs\n%s", installed, again)
			}
			router := &NetlinkRouter{NetNS: h.vm.Name}
			for _, f := range []Family{V4, V6} {
				if ok, err := router.HasRoute(context.Background(), f, *rs.Route); !ok || err != nil {
					t.Errorf("%s policy routing missing: %v", f, err)
				}
			}
			// The proxy sees the original destination as its local address
			// and the client's own source address.
			expect(t, h.peer, "tcp4", "10.77.0.2:8080", "proxy-in orig=10.77.0.2:8080 src=10.77.0.1:")
			expect(t, h.peer, "tcp6", "[fd77::2]:8080", "proxy-in/6 orig=[fd77::2]:8080 src=[fd77::1]:")
			expect(t, h.peer, "tcp4", "10.77.0.2:8081", "app8081")
			expect(t, h.peer, "tcp4", "10.77.0.2:22", "sshd")
			expect(t, h.vm, "tcp4", "10.77.0.1:9090", "proxy-out orig=10.77.0.1:9090")

			// Drift of the policy routing is noticed and repaired.
			if err := router.RemoveRoute(context.Background(), V4, *rs.Route); err != nil {
				t.Fatal(err)
			}
			if d, err := h.applier.Repair(context.Background()); err != nil || !d.Route {
				t.Errorf("Repair = %+v, %v; want route drift", d, err)
			}
			expect(t, h.peer, "tcp4", "10.77.0.2:8080", "proxy-in orig=10.77.0.2:8080 src=10.77.0.1:")

			if err := h.applier.Uninstall(context.Background(), DefaultChainPrefix, rs.Route); err != nil {
				t.Fatal(err)
			}
			if after := h.save(t); after != before {
				t.Errorf("uninstall left:\n%s\nwant:\n%s", after, before)
			}
			for _, f := range []Family{V4, V6} {
				if ok, _ := router.HasRoute(context.Background(), f, *rs.Route); ok {
					t.Errorf("%s policy routing left after uninstall", f)
				}
			}
			expect(t, h.peer, "tcp4", "10.77.0.2:8080", "app8080")
			expect(t, h.vm, "tcp4", "10.77.0.1:9090", "peer9090")
		})
	}
}
