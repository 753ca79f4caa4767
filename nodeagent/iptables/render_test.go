package iptables

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func renderText(t *testing.T, cfg Config) string {
	t.Helper()
	rs, err := Render(cfg)
	if err != nil {
		t.Fatalf("Render: %v", err)
	}
	var b strings.Builder
	for _, f := range rs.Families() {
		fmt.Fprintf(&b, "# %s\n%s", f, rs.Payload(f))
	}
	if rs.Route != nil {
		fmt.Fprintf(&b, "# route: fwmark %#x lookup %d; local default dev lo table %d\n", rs.Route.Mark, rs.Route.Table, rs.Route.Table)
	}
	return b.String()
}

func TestRenderGolden(t *testing.T) {
	cases := map[string]Config{
		"default":             {},
		"tproxy":              {Mode: ModeTProxy},
		"dns":                 {CaptureDNS: true, HostDNSServers: []string{"127.0.0.53"}, DNSServers: []string{"10.96.0.10", "fd00::a"}},
		"dns_all":             {CaptureDNS: true, CaptureAllDNS: true},
		"dns_port53_excluded": {CaptureDNS: true, HostDNSServers: []string{"10.0.0.2"}, OutboundPortsExclude: []int{53}},
		"dns_owner_exclude": {CaptureDNS: true, HostDNSServers: []string{"127.0.0.53"},
			OwnerUsersExclude: []string{"953"}, OwnerGroupsExclude: []string{"systemd-resolve"}},
		"proxy_id_lists":                    {ProxyUID: "3,4", ProxyGID: "1,2", CaptureDNS: true, HostDNSServers: []string{"127.0.0.53"}},
		"owner_include":                     {OwnerUsersInclude: []string{"101", "tomcat"}, OwnerGroupsInclude: []string{"java", "202"}},
		"owner_exclude":                     {OwnerUsersExclude: []string{"999"}, OwnerGroupsExclude: []string{"888", "ftp"}},
		"tunnel_port":                       {InboundTunnelPort: 15009},
		"management_ports":                  {InboundManagementPorts: []int{15099}},
		"management_ports_none":             {InboundManagementPorts: []int{}},
		"host_loopback_cidr":                {HostLoopbackCIDR: "127.0.0.1/8"},
		"loopback_include":                  {OutboundIPRanges: []string{"127.1.2.3/32"}},
		"virt_interfaces":                   {RerouteVirtualInterfaces: []string{"tap0", "br-vm"}},
		"virt_interfaces_ranges":            {RerouteVirtualInterfaces: []string{"tap0"}, OutboundIPRanges: []string{"10.0.0.0/8", "fd00::/8"}},
		"virt_interfaces_tproxy":            {Mode: ModeTProxy, RerouteVirtualInterfaces: []string{"tap0"}},
		"drop_invalid_exclude_iface":        {DropInvalid: true, ExcludeInterfaces: []string{"eth9"}},
		"drop_invalid_exclude_iface_tproxy": {Mode: ModeTProxy, DropInvalid: true, ExcludeInterfaces: []string{"eth9"}},
		"drop_invalid":                      {DropInvalid: true},
		"inbound_ports_list":                {InboundPorts: []string{"8080", "9090"}},
		"inbound_exclude":                   {InboundPortsExclude: []int{8081, 9000}},
		"inbound_none":                      {InboundPorts: []string{}},
		"capture_ssh":                       {CaptureSSH: true},
		"outbound_ports":                    {OutboundPortsInclude: []int{3306}, OutboundPortsExclude: []int{5432, 6379}},
		"outbound_ranges": {
			OutboundIPRanges:        []string{"10.0.0.0/8", "fd00::/8"},
			OutboundIPRangesExclude: []string{"10.96.0.0/12", "fd00:1::/32"},
		},
		"outbound_ranges_exclude_all": {OutboundIPRangesExclude: []string{"169.254.169.254/32"}},
		"exclude_interfaces":          {ExcludeInterfaces: []string{"docker0", "wg0"}},
		"ipv4_only":                   {DisableIPv6: true},
		"custom_ids_ports":            {ProxyUID: "999", ProxyGID: "998", OutboundPort: 16001, InboundPort: 16006, ChainPrefix: "MESH"},
		"tproxy_ports_list":           {Mode: ModeTProxy, InboundPorts: []string{"8080"}, TProxyMark: 0x100, TProxyTable: 200},
		"combined_redirect": {
			CaptureDNS: true, HostDNSServers: []string{"127.0.0.53"}, DropInvalid: true, InboundPortsExclude: []int{8081},
			OutboundPortsExclude: []int{5432}, OutboundIPRangesExclude: []string{"192.168.0.0/16"},
			ExcludeInterfaces: []string{"eth9"},
		},
		"combined_tproxy": {
			Mode: ModeTProxy, CaptureDNS: true, CaptureAllDNS: true, DropInvalid: true, InboundPorts: []string{"8080", "8443"},
			OutboundIPRanges: []string{"10.0.0.0/8"}, OutboundPortsInclude: []int{443}, ExcludeInterfaces: []string{"eth9"},
		},
	}
	for name, cfg := range cases {
		t.Run(name, func(t *testing.T) {
			got := renderText(t, cfg)
			path := filepath.Join("testdata", name+".golden")
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create)", err)
			}
			if got != string(want) {
				t.Errorf("%s differs from golden (run with -update if intended)\n--- got\n%s", path, got)
			}
		})
	}
}

// TestRenderProperties checks semantics that must hold whatever the golden
// files say.
func TestRenderProperties(t *testing.T) {
	rs, err := Render(Config{})
	if err != nil {
		t.Fatal(err)
	}
	v4 := rs.Payload(V4)
	for _, want := range []string{
		"-A BAREMESH_INBOUND -p tcp --dport 22 -j RETURN",
		"-A BAREMESH_INBOUND -p tcp --dport 15020 -j RETURN",
		"-A BAREMESH_INBOUND -p tcp --dport 15021 -j RETURN",
		"-A BAREMESH_INBOUND -p tcp --dport 15090 -j RETURN",
		"-A BAREMESH_OUTPUT -m owner --uid-owner 1337 -j RETURN",
		"-A BAREMESH_OUTPUT -m owner --gid-owner 1337 -j RETURN",
		"-j REDIRECT --to-ports 15001", "-j REDIRECT --to-ports 15006",
	} {
		if !strings.Contains(v4, want) {
			t.Errorf("default ruleset lacks %q", want)
		}
	}
	// Every rule is in one of our chains; the only lines touching built-in
	// chains are the jumps.
	for _, f := range rs.Families() {
		for _, tb := range rs.Tables(f) {
			for _, r := range tb.Rules {
				if !strings.HasPrefix(r, "-A BAREMESH_") {
					t.Errorf("%s %s: rule outside our chains: %s", f, tb.Name, r)
				}
			}
		}
	}
	if strings.Contains(rs.Payload(V6), "127.0.0.1") || strings.Contains(v4, "::1/128") {
		t.Error("addresses leaked across families")
	}
	ssh, _ := Render(Config{CaptureSSH: true})
	if strings.Contains(ssh.Payload(V4), "--dport 22 ") {
		t.Error("captureSSH still excludes port 22")
	}
	if rs.Route != nil {
		t.Error("REDIRECT mode has policy routing")
	}
	tp, _ := Render(Config{Mode: ModeTProxy})
	if tp.Route == nil || tp.Route.Mark != 0x539 || tp.Route.Table != 133 {
		t.Errorf("TPROXY route = %+v", tp.Route)
	}
}

func TestValidateBadInput(t *testing.T) {
	cases := []struct {
		name  string
		cfg   Config
		field string
	}{
		{"invalid CIDR", Config{OutboundIPRanges: []string{"10.0.0.0/33"}}, "outboundIPRanges[0]"},
		{"invalid exclude CIDR", Config{OutboundIPRangesExclude: []string{"nonsense"}}, "outboundIPRangesExclude[0]"},
		{"star with others", Config{OutboundIPRanges: []string{"*", "10.0.0.0/8"}}, "outboundIPRanges"},
		{"port out of range", Config{OutboundPort: 70000}, "outboundPort"},
		{"excluded port out of range", Config{InboundPortsExclude: []int{0}}, "inboundPortsExclude[0]"},
		{"inbound port list out of range", Config{InboundPorts: []string{"65536"}}, "inboundPorts[0]"},
		{"inbound port not a number", Config{InboundPorts: []string{"http"}}, "inboundPorts[0]"},
		{"inbound equals outbound", Config{InboundPort: 15001}, "inboundPort"},
		{"dns port clash", Config{CaptureDNS: true, DNSPort: 15006}, "dnsPort"},
		{"inbound include and exclude", Config{InboundPorts: []string{"8080"}, InboundPortsExclude: []int{8080}}, "inboundPortsExclude"},
		{"outbound include and exclude", Config{OutboundPortsInclude: []int{443}, OutboundPortsExclude: []int{443}}, "outboundPortsExclude"},
		{"range include and exclude", Config{OutboundIPRanges: []string{"10.0.0.0/8"}, OutboundIPRangesExclude: []string{"10.0.0.0/8"}}, "outboundIPRangesExclude"},
		{"uid not a number", Config{ProxyUID: "istio"}, "proxyUID"},
		{"gid negative", Config{ProxyGID: "-1"}, "proxyGID"},
		{"unknown mode", Config{Mode: "NAT"}, "mode"},
		{"lower-case mode", Config{Mode: "redirect"}, "mode"},
		{"bad chain prefix", Config{ChainPrefix: "ba-remesh"}, "chainPrefix"},
		{"bad interface", Config{ExcludeInterfaces: []string{"eth0 -j ACCEPT"}}, "excludeInterfaces[0]"},
		{"reserved table", Config{Mode: ModeTProxy, TProxyTable: 254}, "tproxyTable"},
		{"uid list with a name", Config{ProxyUID: "1337,istio"}, "proxyUID"},
		{"gid list empty entry", Config{ProxyGID: "1337,"}, "proxyGID"},
		{"tunnel port out of range", Config{InboundTunnelPort: 70000}, "inboundTunnelPort"},
		{"management port out of range", Config{InboundManagementPorts: []int{0}}, "inboundManagementPorts[0]"},
		{"host loopback not loopback", Config{HostLoopbackCIDR: "10.0.0.1/32"}, "hostLoopbackCIDR"},
		{"host loopback too wide", Config{HostLoopbackCIDR: "0.0.0.0/0"}, "hostLoopbackCIDR"},
		{"host loopback IPv6", Config{HostLoopbackCIDR: "::1/128"}, "hostLoopbackCIDR"},
		{"owner users include and exclude", Config{OwnerUsersInclude: []string{"1"}, OwnerUsersExclude: []string{"2"}}, "ownerUsersExclude"},
		{"owner groups include and exclude", Config{OwnerGroupsInclude: []string{"1"}, OwnerGroupsExclude: []string{"2"}}, "ownerGroupsExclude"},
		{"owner name with a space", Config{OwnerGroupsExclude: []string{"a b"}}, "ownerGroupsExclude[0]"},
		{"bad virtual interface", Config{RerouteVirtualInterfaces: []string{"tap0 -j ACCEPT"}}, "rerouteVirtualInterfaces[0]"},
		{"virtual interface also excluded", Config{RerouteVirtualInterfaces: []string{"tap0"}, ExcludeInterfaces: []string{"tap0"}}, "rerouteVirtualInterfaces"},
		{"dns server not an address", Config{CaptureDNS: true, DNSServers: []string{"dns.example"}}, "dnsServers[0]"},
		{"dns capture without a resolver", Config{CaptureDNS: true}, "captureDNS"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rs, err := Render(tc.cfg)
			if err == nil {
				t.Fatalf("Render accepted %+v: %v", tc.cfg, rs.Payload(V4))
			}
			if !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("error %v does not wrap ErrInvalidConfig", err)
			}
			if !strings.Contains(err.Error(), tc.field+":") {
				t.Errorf("error %q does not name field %s", err, tc.field)
			}
		})
	}
}

func TestCheckEUID(t *testing.T) {
	if err := checkEUID(0); err != nil {
		t.Errorf("root rejected: %v", err)
	}
	err := checkEUID(1000)
	if !errors.Is(err, ErrNotRoot) || !strings.Contains(err.Error(), "uid 1000") {
		t.Errorf("checkEUID(1000) = %v", err)
	}
}

func BenchmarkRender(b *testing.B) {
	cfg := Config{CaptureDNS: true, HostDNSServers: []string{"127.0.0.53"}, DropInvalid: true, InboundPortsExclude: []int{8081, 9000},
		OutboundPortsExclude: []int{5432}, OutboundIPRangesExclude: []string{"169.254.169.254/32", "fd00::/8"}}
	var lines int
	for b.Loop() {
		rs, err := Render(cfg)
		if err != nil {
			b.Fatal(err)
		}
		lines = strings.Count(rs.Payload(V4), "\n") + strings.Count(rs.Payload(V6), "\n")
	}
	b.ReportMetric(float64(lines), "lines/op")
}
