package tunnel

import (
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func baseConfig(kind Kind) Config {
	return Config{Kind: kind, NodeUnderlay: netip.MustParseAddr("10.200.2.1"), ProxyUnderlay: netip.MustParseAddr("10.200.2.2"),
		PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.200.1.0/24")}}
}

// TestBuildGolden: testdata/NAME.golden holds both sides as commands.
func TestBuildGolden(t *testing.T) {
	excl := baseConfig(KindVXLAN)
	excl.ExcludeCIDRs = []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12"), netip.MustParsePrefix("10.200.3.7/32")}
	excl.PodCIDRs = append(excl.PodCIDRs, netip.MustParsePrefix("10.201.0.5/32"))
	excl.MTU, excl.VNI, excl.Mark, excl.Table = 1400, 42, 0x10, 77
	v6 := baseConfig(KindVXLAN)
	v6.IPv6 = true
	v6.PodCIDRs = append(v6.PodCIDRs, netip.MustParsePrefix("fd20:1::/64"))
	v6.ExcludeCIDRs = []netip.Prefix{netip.MustParsePrefix("fd00:96::/108"), netip.MustParsePrefix("10.96.0.0/12")}
	for name, cfg := range map[string]Config{
		"vxlan":    baseConfig(KindVXLAN),
		"geneve":   baseConfig(KindGeneve),
		"excludes": excl,
		"ipv6":     v6,
	} {
		t.Run(name, func(t *testing.T) {
			d, err := Build(cfg)
			if err != nil {
				t.Fatal(err)
			}
			got := "# node\n" + d.Node.String() + "# proxy\n" + d.Proxy.String()
			path := filepath.Join("testdata", name+".golden")
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update)", err)
			}
			if got != string(want) {
				t.Errorf("%s differs (run with -update to accept):\n%s", path, got)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	for name, tc := range map[string]struct {
		mut  func(*Config)
		want string
	}{
		"kind":                 {func(c *Config) { c.Kind = "gre" }, "kind"},
		"v6 cidr without ipv6": {func(c *Config) { c.PodCIDRs = []netip.Prefix{netip.MustParsePrefix("fd20::/64")} }, "podCIDRs/excludeCIDRs"},
		"v6 inner not v6":      {func(c *Config) { c.IPv6, c.NodeInner6 = true, netip.MustParsePrefix("10.0.0.1/30") }, "nodeInner6/proxyInner6"},
		"prefix":               {func(c *Config) { c.ChainPrefix = "BMAMBIENT" }, "chainPrefix"},
		"reply tbl":            {func(c *Config) { c.ProxyReplyTable = 101 }, "proxyTable/proxyReplyTable"},
		"v6 pods":              {func(c *Config) { c.PodCIDRs = []netip.Prefix{netip.MustParsePrefix("fd00::/64")} }, "not an IPv4"},
		"underlay":             {func(c *Config) { c.NodeUnderlay = netip.Addr{} }, "nodeUnderlay"},
		"inner":                {func(c *Config) { c.ProxyInner = netip.MustParsePrefix("169.254.9.2/30") }, "one prefix"},
		"vni":                  {func(c *Config) { c.VNI = 1 << 24 }, "24 bits"},
		"main":                 {func(c *Config) { c.Table = 254 }, "dedicated"},
		"long name":            {func(c *Config) { c.NodeDevice = "a-very-long-device" }, "interface name"},
	} {
		t.Run(name, func(t *testing.T) {
			c := baseConfig(KindVXLAN)
			tc.mut(&c)
			_, err := Build(c)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Build: %v, want error containing %q", err, tc.want)
			}
		})
	}
}

func TestNoPodCIDRs(t *testing.T) {
	c := baseConfig(KindVXLAN)
	c.PodCIDRs = nil
	d, err := Build(c)
	if err != nil {
		t.Fatalf("Build without podCIDRs: %v", err)
	}
	if got := d.Node.Iptables.V4[0].Rules; got[len(got)-1] != "-A BMTUN_PRE -j "+EnrolChain {
		t.Errorf("node rules %q do not end with the jump to %s", got, EnrolChain)
	}
}

func TestParseEnrolled(t *testing.T) {
	out := "-N BMAMBIENT_PODS\n-A BMAMBIENT_PODS -s 10.1.2.3/32 -j MARK --set-xmark 0x100/0x100\n" +
		"-A BMAMBIENT_PODS -s 10.1.2.4/32 -j MARK --set-xmark 0x100/0x100\n-A OTHER -s 10.9.9.9/32 -j ACCEPT\n"
	got := parseEnrolled(out)
	if len(got) != 2 || got[0].String() != "10.1.2.3" || got[1].String() != "10.1.2.4" {
		t.Errorf("parseEnrolled = %v", got)
	}
}
