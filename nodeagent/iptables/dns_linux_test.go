package iptables

import (
	"context"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/baremesh/baremesh/nodeagent/nstest"
)

// dnsHost is a "VM" namespace whose upstream DNS server (the peer,
// 10.77.0.1:53) answers 10.53.0.2 to everything.
func newDNSHost(t *testing.T, b Backend) *host {
	t.Helper()
	nstest.RequireRoot(t)
	nstest.RequireBinary(t, "iptables-"+string(b)+"-restore")
	nstest.RequireBinary(t, "setpriv")
	h := &host{vm: nstest.New(t), peer: nstest.New(t), backend: b}
	nstest.Link(t, h.vm, []string{"10.77.0.2/24"}, h.peer, []string{"10.77.0.1/24"})
	h.runner = &ExecRunner{Backend: b, NetNS: h.vm.Name}
	h.applier = NewApplier(discard(), ApplierOptions{Runner: h.runner})
	h.peer.ServeDNS(t, "10.77.0.1:53", netip.MustParseAddr("10.53.0.2"))
	return h
}

const (
	resolverUID = 953 // the local forwarder's user (systemd-resolve)
	resolverGID = 954
)

// startResolvers starts, in the VM, the proxy's DNS listener (as the
// proxy's uid: names under "mesh." it answers itself with 10.53.0.1, the
// rest it forwards to the host's resolver, as Istio's agent does) and a
// local forwarder on 127.0.0.53 (as systemd-resolved, its own user) whose
// upstream is the peer.
func startResolvers(t *testing.T, h *host) {
	t.Helper()
	h.vm.Start(t, 1337, 1337, "dnsforward", "127.0.0.1:15053", "127.0.0.53:53", "mesh.", "10.53.0.1")
	h.vm.Start(t, resolverUID, resolverGID, "dnsforward", "127.0.0.53:53", "10.77.0.1:53")
}

// proxyQueries is how many queries the proxy's DNS listener received.
func proxyQueries(t *testing.T, h *host) int {
	t.Helper()
	n, err := nstest.ForwarderStats(h.vm, "127.0.0.1:15053")
	if err != nil {
		t.Fatalf("proxy stats: %v", err)
	}
	return n
}

// waitQuiet polls until the proxy's query count stops growing (a loop
// bounded by the forwarders' limit has run out).
func waitQuiet(t *testing.T, h *host) int {
	t.Helper()
	last := -1
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		n := proxyQueries(t, h)
		if n == last {
			return n
		}
		last = n
		time.Sleep(300 * time.Millisecond)
	}
	t.Fatal("proxy DNS traffic never settled")
	return 0
}

// TestTrafficDNSNoLoop reproduces the loop a host with a local DNS
// forwarder gets when every port-53 query is captured (the agent's rules
// before, captureAllDNS now): the forwarder's upstream queries come back
// to the proxy, which sends them to the forwarder again, and no answer
// ever arrives. Capturing only queries to the host's resolvers
// (resolv.conf: 127.0.0.53) has no loop; nor does excluding the
// forwarder's user or group when its upstream is also a captured server.
func TestTrafficDNSNoLoop(t *testing.T) {
	resolvConf := []byte("# systemd-resolved stub\nnameserver 127.0.0.53\noptions edns0 trust-ad\n")
	cases := []struct {
		name string
		cfg  Config
		loop bool
	}{
		{"capture all (the rules before): loops", Config{CaptureDNS: true, CaptureAllDNS: true}, true},
		{"host resolvers only", Config{CaptureDNS: true, HostDNSServers: ParseResolvConf(resolvConf)}, false},
		{"forwarder's upstream captured too: loops", Config{CaptureDNS: true, HostDNSServers: ParseResolvConf(resolvConf),
			DNSServers: []string{"10.77.0.1"}}, true},
		{"forwarder's upstream captured, its user excluded", Config{CaptureDNS: true, HostDNSServers: ParseResolvConf(resolvConf),
			DNSServers: []string{"10.77.0.1"}, OwnerUsersExclude: []string{strconv.Itoa(resolverUID)}}, false},
		{"forwarder's upstream captured, its group excluded", Config{CaptureDNS: true, HostDNSServers: ParseResolvConf(resolvConf),
			DNSServers: []string{"10.77.0.1"}, OwnerGroupsExclude: []string{strconv.Itoa(resolverGID)}}, false},
	}
	for _, b := range backends {
		for _, tc := range cases {
			t.Run(string(b)+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				h := newDNSHost(t, b)
				startResolvers(t, h)
				apply(t, h, tc.cfg)
				// A mesh name is answered by the proxy: the app's query to
				// the host's resolver was captured.
				a, err := h.vm.Resolve("udp", "127.0.0.53:53", "svc.mesh.")
				expectDNS(t, a, err, "10.53.0.1")
				a, err = h.vm.Resolve("udp", "127.0.0.53:53", "upstream.example.")
				n := waitQuiet(t, h)
				if tc.loop {
					if err == nil || n < 10 {
						t.Errorf("expected the loop: answer %v, %v; proxy saw %d queries", a, err, n)
					}
					return
				}
				expectDNS(t, a, err, "10.53.0.2")
				if n != 2 {
					t.Errorf("proxy saw %d queries, want 2 (the app's two; a loop shows more)", n)
				}
				// An app querying a server that is not captured goes there.
				if !contains(tc.cfg.DNSServers, "10.77.0.1") {
					a, err = h.vm.Resolve("udp", "10.77.0.1:53", "svc.mesh.")
					expectDNS(t, a, err, "10.53.0.2")
				} else {
					a, err = h.vm.Resolve("udp", "10.77.0.1:53", "svc.mesh.")
					expectDNS(t, a, err, "10.53.0.1")
				}
			})
		}
	}
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// TestTrafficDNSConntrackZones reuses one UDP source port for an app's
// query and the proxy's upstream query to the same resolver, within the
// conntrack timeout, in both orders. With the zone rules, each query goes
// where it should; with the raw table's zone chains flushed (the rules
// before), the second query joins the first one's conntrack entry: the
// proxy's upstream query is redirected back to the proxy, and the app's
// query skips the proxy.
func TestTrafficDNSConntrackZones(t *testing.T) {
	for _, b := range backends {
		for _, zones := range []bool{true, false} {
			name := string(b) + "/zones"
			if !zones {
				name = string(b) + "/no zones (the rules before)"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				h := newDNSHost(t, b)
				// The proxy's DNS listener, as the proxy's user, answers
				// everything itself (10.53.0.1).
				h.vm.Start(t, 1337, 1337, "dnsforward", "127.0.0.1:15053", "127.0.0.53:53", ".", "10.53.0.1")
				apply(t, h, Config{CaptureDNS: true, HostDNSServers: []string{"10.77.0.1"}})
				if !zones {
					for _, c := range []string{"BAREMESH_OUTPUT_DNS", "BAREMESH_INBOUND_DNS"} {
						h.vm.Run(t, "iptables-"+string(b), "-t", "raw", "-F", c)
					}
				}
				app := func(port int) (netip.Addr, error) {
					var a netip.Addr
					err := h.vm.Do(func() error {
						var err error
						a, err = nstest.ResolveFrom("10.77.0.1:53", "q.example.", port)
						return err
					})
					return a, err
				}
				proxy := func(port int) string {
					out, err := h.vm.RunAs(t, 1337, 1337, "dnsfrom", "10.77.0.1:53", "q.example.", strconv.Itoa(port))
					if err != nil {
						return err.Error()
					}
					return out
				}
				// App first, then the proxy from the same port.
				a, err := app(40053)
				expectDNS(t, a, err, "10.53.0.1")
				got := proxy(40053)
				if zones && got != "10.53.0.2" {
					t.Errorf("proxy's upstream query after an app's from the same port: %s, want the resolver's 10.53.0.2", got)
				}
				if !zones && got != "10.53.0.1" {
					t.Errorf("without zones the proxy's upstream query should come back to the proxy (10.53.0.1): %s", got)
				}
				// The proxy first, then an app from the same port.
				if got := proxy(40054); got != "10.53.0.2" {
					t.Errorf("proxy's upstream query: %s, want 10.53.0.2", got)
				}
				a, err = app(40054)
				if zones {
					expectDNS(t, a, err, "10.53.0.1")
				} else if err != nil || a.String() != "10.53.0.2" {
					t.Errorf("without zones the app's query should skip the proxy (10.53.0.2): %v, %v", a, err)
				}
				if d, err := h.applier.Check(context.Background()); zones && (err != nil || d.Any()) {
					t.Errorf("Check = %v, %v", d, err)
				}
			})
		}
	}
}
