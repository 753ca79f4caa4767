package iptables

import (
	"encoding/binary"
	"net/netip"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/baremesh/baremesh/nodeagent/nstest"
)

// TestTrafficIstioSettings checks, with real traffic on both backends,
// the istio-iptables settings that change what is captured.
func TestTrafficIstioSettings(t *testing.T) {
	cases := []struct {
		name  string
		cfg   Config
		setup func(t *testing.T, h *host)
		check func(t *testing.T, h *host)
	}{
		{"proxy uid and gid lists", Config{ProxyUID: "1337,1338", ProxyGID: "1337,1339"}, nil, func(t *testing.T, h *host) {
			for _, id := range [][2]int{{1338, 4242}, {4242, 1339}} {
				out, err := h.vm.RunAs(t, id[0], id[1], "banner", "tcp4", "10.77.0.1:9090")
				if err != nil || !strings.HasPrefix(out, "peer9090") {
					t.Errorf("outbound as uid/gid %v: %q, %v; want it to bypass capture", id, out, err)
				}
			}
			out, err := h.vm.RunAs(t, 4242, 4242, "banner", "tcp4", "10.77.0.1:9090")
			if err != nil || !strings.HasPrefix(out, "proxy-out") {
				t.Errorf("outbound as uid 4242: %q, %v; want it captured", out, err)
			}
			// The second proxy uid's connections to this host go to its
			// inbound listener, as the first's.
			out, err = h.vm.RunAs(t, 1338, 4242, "banner", "tcp4", "10.77.0.2:8080")
			if err != nil || !strings.HasPrefix(out, "proxy-in") {
				t.Errorf("proxy uid 1338 to its host: %q, %v; want the inbound listener", out, err)
			}
		}},
		{"tunnel port never captured inbound", Config{}, func(t *testing.T, h *host) {
			h.vm.Serve(t, "tcp4", "0.0.0.0:15008", "hbone", nstest.ServerOptions{})
			h.vm.Serve(t, "tcp4", "0.0.0.0:15009", "app15009", nstest.ServerOptions{})
		}, func(t *testing.T, h *host) {
			expect(t, h.peer, "tcp4", "10.77.0.2:15008", "hbone")
			expect(t, h.peer, "tcp4", "10.77.0.2:15009", "proxy-in")
			out, err := h.vm.RunAs(t, 1337, 1337, "banner", "tcp4", "10.77.0.2:15008")
			if err != nil || !strings.HasPrefix(out, "hbone") {
				t.Errorf("proxy to its own tunnel port: %q, %v; want it direct", out, err)
			}
		}},
		{"tunnel port settable", Config{InboundTunnelPort: 15009}, func(t *testing.T, h *host) {
			h.vm.Serve(t, "tcp4", "0.0.0.0:15008", "app15008", nstest.ServerOptions{})
			h.vm.Serve(t, "tcp4", "0.0.0.0:15009", "hbone", nstest.ServerOptions{})
		}, func(t *testing.T, h *host) {
			expect(t, h.peer, "tcp4", "10.77.0.2:15009", "hbone")
			expect(t, h.peer, "tcp4", "10.77.0.2:15008", "proxy-in")
		}},
		{"management ports settable", Config{InboundManagementPorts: []int{15099}}, func(t *testing.T, h *host) {
			h.vm.Serve(t, "tcp4", "0.0.0.0:15099", "admin15099", nstest.ServerOptions{})
		}, func(t *testing.T, h *host) {
			expect(t, h.peer, "tcp4", "10.77.0.2:15099", "admin15099")
			expect(t, h.peer, "tcp4", "10.77.0.2:15021", "proxy-in") // no longer reserved
		}},
		{"owner groups exclude", Config{OwnerGroupsExclude: []string{"777"}}, nil, func(t *testing.T, h *host) {
			owners(t, h, map[[2]int]string{{4242, 777}: "peer9090", {4242, 4242}: "proxy-out"})
		}},
		{"owner groups include", Config{OwnerGroupsInclude: []string{"777"}}, nil, func(t *testing.T, h *host) {
			owners(t, h, map[[2]int]string{{4242, 777}: "proxy-out", {4242, 4242}: "peer9090"})
		}},
		{"owner users exclude", Config{OwnerUsersExclude: []string{"4243"}}, nil, func(t *testing.T, h *host) {
			owners(t, h, map[[2]int]string{{4243, 4242}: "peer9090", {4242, 4242}: "proxy-out"})
		}},
		{"owner users include", Config{OwnerUsersInclude: []string{"4243"}}, nil, func(t *testing.T, h *host) {
			owners(t, h, map[[2]int]string{{4243, 4242}: "proxy-out", {4242, 4242}: "peer9090"})
		}},
		{"loopback address in the outbound ranges", Config{OutboundIPRanges: []string{"127.1.2.3/32"}}, nil, func(t *testing.T, h *host) {
			expect(t, h.vm, "tcp4", "127.1.2.3:8080", "proxy-out orig=127.1.2.3:8080")
			expect(t, h.vm, "tcp4", "127.0.0.1:8080", "app8080")
			expect(t, h.vm, "tcp4", "10.77.0.1:9090", "peer9090")
		}},
		{"host loopback CIDR default", Config{}, nil, func(t *testing.T, h *host) {
			out, err := h.vm.RunAs(t, 1337, 1337, "banner", "tcp4", "127.1.2.3:8080")
			if err != nil || !strings.HasPrefix(out, "proxy-in") {
				t.Errorf("proxy to 127.1.2.3 with hostLoopbackCIDR 127.0.0.1/32: %q, %v; want its inbound listener", out, err)
			}
		}},
		{"host loopback CIDR 127.0.0.1/8", Config{HostLoopbackCIDR: "127.0.0.1/8"}, nil, func(t *testing.T, h *host) {
			out, err := h.vm.RunAs(t, 1337, 1337, "banner", "tcp4", "127.1.2.3:8080")
			if err != nil || !strings.HasPrefix(out, "app8080") {
				t.Errorf("proxy to 127.1.2.3 with hostLoopbackCIDR 127.0.0.1/8: %q, %v; want the app directly", out, err)
			}
		}},
		{"UDP DNS not captured when port 53 is excluded", Config{CaptureDNS: true, DNSServers: []string{"10.77.0.1"},
			OutboundPortsExclude: []int{53}}, nil, func(t *testing.T, h *host) {
			for _, network := range []string{"udp", "tcp"} {
				a, err := h.vm.Resolve(network, "10.77.0.1:53", "svc.example.")
				expectDNS(t, a, err, "10.53.0.2")
			}
		}},
		{"UDP DNS captured otherwise", Config{CaptureDNS: true, DNSServers: []string{"10.77.0.1"}}, nil, func(t *testing.T, h *host) {
			for _, network := range []string{"udp", "tcp"} {
				a, err := h.vm.Resolve(network, "10.77.0.1:53", "svc.example.")
				expectDNS(t, a, err, "10.53.0.1")
			}
		}},
		{"virtual interfaces to the outbound listener", Config{RerouteVirtualInterfaces: []string{"tap0"}}, guest, func(t *testing.T, h *host) {
			expect(t, h.guest(t), "tcp4", "10.77.0.1:9090", "proxy-out orig=10.77.0.1:9090 src=10.79.0.2:")
			// Inbound from the guest to this host is not inbound capture.
			expect(t, h.guest(t), "tcp4", "10.79.0.1:8080", "proxy-out orig=10.79.0.1:8080")
		}},
		{"virtual interfaces with outbound ranges", Config{RerouteVirtualInterfaces: []string{"tap0"},
			OutboundIPRanges: []string{"10.88.0.0/24"}}, guest, func(t *testing.T, h *host) {
			expect(t, h.guest(t), "tcp4", "10.88.0.1:9090", "proxy-out orig=10.88.0.1:9090 src=10.79.0.2:")
			expect(t, h.guest(t), "tcp4", "10.77.0.1:9090", "peer9090") // outside the ranges: forwarded
		}},
		{"invalid packets dropped on excluded interfaces (REDIRECT)", Config{DropInvalid: true, ExcludeInterfaces: []string{"eth0"}}, nil,
			func(t *testing.T, h *host) {
				if n := invalidDrops(t, h); n != 1 {
					t.Errorf("invalid packet on excluded eth0: DROP rule counted %d packets, want 1", n)
				}
			}},
		{"invalid packets pass excluded interfaces (TPROXY)", Config{Mode: ModeTProxy, DropInvalid: true, ExcludeInterfaces: []string{"eth0"}}, nil,
			func(t *testing.T, h *host) {
				if n := invalidDrops(t, h); n != 0 {
					t.Errorf("invalid packet on excluded eth0 in TPROXY mode: DROP rule counted %d packets, want 0 (istio-iptables returns first)", n)
				}
			}},
	}
	for _, b := range backends {
		for _, tc := range cases {
			t.Run(string(b)+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				h := newHost(t, b, tc.cfg.Mode == ModeTProxy)
				if tc.setup != nil {
					tc.setup(t, h)
				}
				apply(t, h, tc.cfg)
				tc.check(t, h)
			})
		}
	}
}

// owners dials the peer as each uid/gid and checks who answers.
func owners(t *testing.T, h *host, want map[[2]int]string) {
	t.Helper()
	for id, w := range want {
		out, err := h.vm.RunAs(t, id[0], id[1], "banner", "tcp4", "10.77.0.1:9090")
		if err != nil || !strings.HasPrefix(out, w) {
			t.Errorf("outbound as uid %d gid %d: %q, %v; want %s", id[0], id[1], out, err, w)
		}
	}
}

// guest adds a namespace behind the VM on a veth named tap0 (a VM's tap
// interface), routed through the VM.
func guest(t *testing.T, h *host) {
	t.Helper()
	g := nstest.New(t)
	if out, err := exec.Command("ip", "link", "add", "tap0", "netns", h.vm.Name, "type", "veth", "peer", "name", "eth0", "netns", g.Name).CombinedOutput(); err != nil {
		t.Fatalf("tap0: %v: %s", err, out)
	}
	h.vm.Run(t, "ip", "addr", "add", "10.79.0.1/24", "dev", "tap0")
	h.vm.Run(t, "ip", "link", "set", "tap0", "up")
	h.vm.Run(t, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1")
	g.Run(t, "ip", "addr", "add", "10.79.0.2/24", "dev", "eth0")
	g.Run(t, "ip", "link", "set", "eth0", "up")
	g.Run(t, "ip", "route", "add", "default", "via", "10.79.0.1")
	h.peer.Run(t, "ip", "route", "add", "10.79.0.0/24", "via", "10.77.0.2")
	h.extra = g
}

func (h *host) guest(t *testing.T) *nstest.NS {
	if h.extra == nil {
		t.Fatal("no guest namespace")
	}
	return h.extra
}

var invalidRule = regexp.MustCompile(`^\[(\d+):\d+\] -A BAREMESH_PREROUTING .*INVALID -j DROP`)

// invalidDrops sends the VM one TCP packet with SYN and FIN set (which
// conntrack marks INVALID) from the peer over eth0 and returns how many
// packets the invalid-drop rule counted.
func invalidDrops(t *testing.T, h *host) int {
	t.Helper()
	err := h.peer.Do(func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_TCP)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		src, dst := netip.MustParseAddr("10.77.0.1").As4(), netip.MustParseAddr("10.77.0.2").As4()
		seg := make([]byte, 20)
		binary.BigEndian.PutUint16(seg[0:], 40000)
		binary.BigEndian.PutUint16(seg[2:], 8080)
		binary.BigEndian.PutUint32(seg[4:], 1)
		seg[12] = 5 << 4
		seg[13] = 0x03 // FIN|SYN
		binary.BigEndian.PutUint16(seg[14:], 1024)
		binary.BigEndian.PutUint16(seg[16:], tcpChecksum(src, dst, seg))
		return unix.Sendto(fd, seg, 0, &unix.SockaddrInet4{Addr: dst})
	})
	if err != nil {
		t.Fatalf("sending an invalid packet: %v", err)
	}
	out := h.vm.Run(t, "iptables-"+string(h.backend)+"-save", "-c", "-t", "mangle")
	for _, l := range strings.Split(out, "\n") {
		if m := invalidRule.FindStringSubmatch(l); m != nil {
			n, _ := strconv.Atoi(m[1])
			return n
		}
	}
	t.Fatalf("no invalid-drop rule in:\n%s", out)
	return 0
}

func tcpChecksum(src, dst [4]byte, seg []byte) uint16 {
	var sum uint32
	add := func(b []byte) {
		for i := 0; i+1 < len(b); i += 2 {
			sum += uint32(binary.BigEndian.Uint16(b[i:]))
		}
		if len(b)%2 == 1 {
			sum += uint32(b[len(b)-1]) << 8
		}
	}
	add(src[:])
	add(dst[:])
	add([]byte{0, unix.IPPROTO_TCP})
	add([]byte{byte(len(seg) >> 8), byte(len(seg))})
	add(seg)
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	return ^uint16(sum)
}
