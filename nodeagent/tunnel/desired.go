// Package tunnel redirects the traffic of a node's pods to a node proxy
// (ztunnel in Istio's ambient mode) that runs in its own network
// namespace: an iptables mark on the pods' packets, a policy-routing rule
// sending marked packets to a dedicated table, and a tunnel device (geneve,
// or vxlan where the kernel has no geneve) whose far end is in the proxy's
// namespace, where TPROXY hands the packets to the proxy's listener with
// their original destination intact.
//
// Build is the pure part (config → desired links, addresses, routes, rules,
// sysctls and iptables payload for both ends); the _linux.go executor
// applies, checks and removes that state with vishvananda/netlink. The
// underlay is IPv4; pods' IPv6 traffic is redirected too with ipv6: true.
// It imports nodeagent/iptables of this module, nothing else.
package tunnel

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/baremesh/baremesh/nodeagent/iptables"
)

// Kind is the tunnel device type.
type Kind string

// Kinds. Both carry Ethernet frames over UDP between the two ends; the
// behaviour above the device is the same.
const (
	KindGeneve Kind = "geneve"
	KindVXLAN  Kind = "vxlan"
)

// Config is the tunnel's typed configuration (YAML in the agent).
type Config struct {
	Kind Kind   `yaml:"kind"` // geneve or vxlan; default geneve
	VNI  uint32 `yaml:"vni"`  // default 1000
	Port int    `yaml:"port"` // UDP port; default 6081 (geneve) or 4789 (vxlan)
	MTU  int    `yaml:"mtu"`  // 0: the kernel's default for the device
	// NodeUnderlay and ProxyUnderlay are the two ends' addresses on the
	// network that carries the encapsulated packets (for example a veth
	// between the node and the proxy's namespace).
	NodeUnderlay  netip.Addr `yaml:"nodeUnderlay"`
	ProxyUnderlay netip.Addr `yaml:"proxyUnderlay"`
	// NodeInner and ProxyInner are the addresses inside the tunnel, in
	// one small prefix. Defaults 169.254.200.1/30 and 169.254.200.2/30.
	NodeInner  netip.Prefix `yaml:"nodeInner"`
	ProxyInner netip.Prefix `yaml:"proxyInner"`
	// PodCIDRs are sources whose traffic is always redirected; optional.
	// Pods enrolled one by one (Enroller, called by the CNI plugin for
	// ambient pods) are redirected as well.
	PodCIDRs []netip.Prefix `yaml:"podCIDRs"`
	// ExcludeCIDRs are destinations that keep going direct.
	ExcludeCIDRs []netip.Prefix `yaml:"excludeCIDRs"`
	// Device names of the tunnel on each side. Default "bmtun0".
	NodeDevice  string `yaml:"nodeDevice"`
	ProxyDevice string `yaml:"proxyDevice"`
	// Mark (and its mask, the same bits) selects redirected packets on the
	// node; Table is their routing table; RulePriority the rule's.
	// Defaults 0x100, 100, 100.
	Mark         uint32 `yaml:"mark"`
	Table        int    `yaml:"table"`
	RulePriority int    `yaml:"rulePriority"`
	// ProxyPort is the proxy's transparent listener (default 15008);
	// ProxyMark and ProxyTable its TPROXY policy routing (defaults 0x400
	// and 101).
	ProxyPort  int    `yaml:"proxyPort"`
	ProxyMark  uint32 `yaml:"proxyMark"`
	ProxyTable int    `yaml:"proxyTable"`
	// ProxyReplyTable routes the proxy's replies on redirected
	// connections back through the tunnel, whatever the pod's address.
	// Default 102.
	ProxyReplyTable int `yaml:"proxyReplyTable"`
	// ChainPrefix names our iptables chains on both sides. Default BMTUN.
	ChainPrefix string `yaml:"chainPrefix"`
	// IPv6 redirects pods' IPv6 traffic as well (the tunnel carries it
	// over the IPv4 underlay): IPv6 addresses inside the tunnel
	// (NodeInner6, ProxyInner6; defaults fd62:6d74::1/126 and ::2/126),
	// ip6tables rules, IPv6 routes and rules. podCIDRs and excludeCIDRs
	// may then hold IPv6 prefixes.
	IPv6        bool         `yaml:"ipv6"`
	NodeInner6  netip.Prefix `yaml:"nodeInner6"`
	ProxyInner6 netip.Prefix `yaml:"proxyInner6"`
}

// WithDefaults fills unset fields.
func (c Config) WithDefaults() Config {
	if c.Kind == "" {
		c.Kind = KindGeneve
	}
	if c.VNI == 0 {
		c.VNI = 1000
	}
	if c.Port == 0 {
		c.Port = 6081
		if c.Kind == KindVXLAN {
			c.Port = 4789
		}
	}
	def := func(p *netip.Prefix, s string) {
		if !p.IsValid() {
			*p = netip.MustParsePrefix(s)
		}
	}
	def(&c.NodeInner, "169.254.200.1/30")
	def(&c.ProxyInner, "169.254.200.2/30")
	if c.IPv6 {
		def(&c.NodeInner6, "fd62:6d74::1/126")
		def(&c.ProxyInner6, "fd62:6d74::2/126")
	}
	for _, d := range []*string{&c.NodeDevice, &c.ProxyDevice} {
		if *d == "" {
			*d = "bmtun0"
		}
	}
	setU := func(v *uint32, d uint32) {
		if *v == 0 {
			*v = d
		}
	}
	setI := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	setU(&c.Mark, DefaultMark)
	setI(&c.Table, 100)
	setI(&c.RulePriority, 100)
	setI(&c.ProxyPort, 15008)
	setU(&c.ProxyMark, 0x400)
	setI(&c.ProxyTable, 101)
	setI(&c.ProxyReplyTable, 102)
	if c.ChainPrefix == "" {
		c.ChainPrefix = "BMTUN"
	}
	return c
}

// Validate checks a config with defaults applied; errors name the field.
func (c Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("tunnel: %s: %s", field, fmt.Sprintf(format, args...)))
	}
	if c.Kind != KindGeneve && c.Kind != KindVXLAN {
		bad("kind", "%q (want geneve or vxlan)", c.Kind)
	}
	if c.VNI >= 1<<24 {
		bad("vni", "%d does not fit in 24 bits", c.VNI)
	}
	if c.Port < 1 || c.Port > 65535 {
		bad("port", "%d is not a port", c.Port)
	}
	for name, a := range map[string]netip.Addr{"nodeUnderlay": c.NodeUnderlay, "proxyUnderlay": c.ProxyUnderlay} {
		if !a.Is4() {
			bad(name, "an IPv4 address is required, got %v", a)
		}
	}
	if !c.NodeInner.Addr().Is4() || !c.ProxyInner.Addr().Is4() || c.NodeInner.Masked() != c.ProxyInner.Masked() || c.NodeInner.Addr() == c.ProxyInner.Addr() {
		bad("nodeInner/proxyInner", "%v and %v must be distinct IPv4 addresses in one prefix", c.NodeInner, c.ProxyInner)
	}
	if c.IPv6 && (!c.NodeInner6.Addr().Is6() || !c.ProxyInner6.Addr().Is6() || c.NodeInner6.Masked() != c.ProxyInner6.Masked() || c.NodeInner6.Addr() == c.ProxyInner6.Addr()) {
		bad("nodeInner6/proxyInner6", "%v and %v must be distinct IPv6 addresses in one prefix", c.NodeInner6, c.ProxyInner6)
	}
	for _, p := range append(append([]netip.Prefix(nil), c.PodCIDRs...), c.ExcludeCIDRs...) {
		if !p.Addr().Is4() && !(c.IPv6 && p.Addr().Is6()) {
			bad("podCIDRs/excludeCIDRs", "%v is not an IPv4 prefix (IPv6 prefixes need ipv6: true)", p)
		}
	}
	if c.Mark == 0 || c.ProxyMark == 0 {
		bad("mark/proxyMark", "must not be zero")
	}
	for _, t := range []struct {
		name string
		v    int
	}{{"table", c.Table}, {"proxyTable", c.ProxyTable}, {"proxyReplyTable", c.ProxyReplyTable}} {
		if t.v <= 0 || t.v == 254 || t.v == 255 {
			bad(t.name, "%d: use a dedicated table, not main or local", t.v)
		}
	}
	if c.ProxyTable == c.ProxyReplyTable {
		bad("proxyTable/proxyReplyTable", "both are %d", c.ProxyTable)
	}
	if strings.HasPrefix(EnrolChain, c.ChainPrefix+"_") {
		bad("chainPrefix", "%q would own the enrolment chain %s", c.ChainPrefix, EnrolChain)
	}
	if c.RulePriority < 2 || c.RulePriority > 32765 {
		bad("rulePriority", "%d (want 2..32765; the one below is used too)", c.RulePriority)
	}
	if c.ProxyPort < 1 || c.ProxyPort > 65535 {
		bad("proxyPort", "%d is not a port", c.ProxyPort)
	}
	for _, d := range []string{c.NodeDevice, c.ProxyDevice} {
		if len(d) > 15 || strings.ContainsAny(d, "/ ") {
			bad("nodeDevice/proxyDevice", "%q is not a valid interface name", d)
		}
	}
	return errors.Join(errs...)
}

// Link is the tunnel device of one side.
type Link struct {
	Name          string
	Kind          Kind
	VNI           uint32
	Port          int
	Local, Remote netip.Addr // Local is not used by geneve
	MTU           int
}

// Route is one route; Local makes it "local DST dev lo" (TPROXY's).
type Route struct {
	Dst   netip.Prefix
	Via   netip.Addr
	Dev   string
	Table int // 0: main
	Local bool
}

// Rule is a policy-routing rule "fwmark Mark/Mask [iif Iif] lookup
// Table", or, when Dst is set, "to Dst lookup Table". V6 makes a fwmark
// rule an IPv6 one.
type Rule struct {
	Mark, Mask uint32
	Iif        string
	Dst        netip.Prefix
	Table      int
	Priority   int
	V6         bool
}

// tableMain is the kernel's main routing table.
const tableMain = 254

// Sysctl is a /proc/sys/net setting; Key is dotted.
type Sysctl struct{ Key, Value string }

// Side is the desired state of one network namespace. It is immutable once
// built.
type Side struct {
	Link     Link
	Addr     netip.Prefix
	Addr6    netip.Prefix // invalid unless ipv6
	Routes   []Route
	Rules    []Rule
	Sysctls  []Sysctl
	Iptables *iptables.Ruleset // V6 only with ipv6
	// EnrolChain, when set, is a mangle chain that must exist before
	// Iptables is applied (it jumps there) but whose rules are not the
	// tunnel's: Enroller adds and removes them.
	EnrolChain string
}

// Desired is both sides of the tunnel.
type Desired struct {
	Node, Proxy Side
}

// Build returns the desired state for cfg (defaults applied). Pure.
func Build(cfg Config) (Desired, error) {
	c := cfg.WithDefaults()
	if err := c.Validate(); err != nil {
		return Desired{}, err
	}
	mark := fmt.Sprintf("%#x/%#x", c.Mark, c.Mark)
	pre := c.ChainPrefix + "_PRE"
	// Node: packets from pods, except those coming back out of the tunnel
	// (the proxy forwarding on their behalf) and excluded destinations,
	// are marked; the mark selects a table whose default route is the
	// proxy's end of the tunnel.
	nodeRules := func(v4 bool) []string {
		rules := []string{fmt.Sprintf("-A %s -i %s -j RETURN", pre, c.NodeDevice)}
		for _, p := range c.ExcludeCIDRs {
			if p.Addr().Is4() == v4 {
				rules = append(rules, fmt.Sprintf("-A %s -d %s -j RETURN", pre, p.Masked()))
			}
		}
		for _, p := range c.PodCIDRs {
			if p.Addr().Is4() == v4 {
				rules = append(rules, fmt.Sprintf("-A %s -s %s -j MARK --set-xmark %s", pre, p.Masked(), mark))
			}
		}
		return append(rules, fmt.Sprintf("-A %s -j %s", pre, EnrolChain))
	}
	node := Side{
		Link:   Link{Name: c.NodeDevice, Kind: c.Kind, VNI: c.VNI, Port: c.Port, Local: c.NodeUnderlay, Remote: c.ProxyUnderlay, MTU: c.MTU},
		Addr:   c.NodeInner,
		Routes: []Route{{Dst: netip.MustParsePrefix("0.0.0.0/0"), Via: c.ProxyInner.Addr(), Dev: c.NodeDevice, Table: c.Table}},
		// The mark survives encapsulation (the tunnel device routes the
		// outer packet with the inner one's mark): without the first rule
		// the outer packet would be routed into the tunnel again.
		Rules: []Rule{{Dst: netip.PrefixFrom(c.ProxyUnderlay, 32), Table: tableMain, Priority: c.RulePriority - 1},
			{Mark: c.Mark, Mask: c.Mark, Table: c.Table, Priority: c.RulePriority}},
		Sysctls:    []Sysctl{{"net.ipv4.conf." + c.NodeDevice + ".rp_filter", "0"}},
		EnrolChain: EnrolChain,
		Iptables: &iptables.Ruleset{Prefix: c.ChainPrefix, V4: []iptables.Table{{Name: "mangle",
			Chains: []string{pre}, Rules: nodeRules(true), Jumps: []string{"-A PREROUTING -j " + pre}}}},
	}
	// Proxy: TCP arriving through the tunnel goes to the transparent
	// listener (TPROXY keeps the original destination as the socket's
	// local address and marks the packet). Replies go back through the
	// tunnel whatever the pod's address: with tcp_fwmark_accept the
	// accepted connection takes the SYN's mark, and locally sent packets
	// with that mark use the reply table, whose default route is the
	// tunnel (routes to PodCIDRs in main do the same for those).
	pmark := fmt.Sprintf("%#x/%#x", c.ProxyMark, c.ProxyMark)
	proxy := Side{
		Link: Link{Name: c.ProxyDevice, Kind: c.Kind, VNI: c.VNI, Port: c.Port, Local: c.ProxyUnderlay, Remote: c.NodeUnderlay, MTU: c.MTU},
		Addr: c.ProxyInner,
		Routes: []Route{{Dst: netip.MustParsePrefix("0.0.0.0/0"), Dev: "lo", Table: c.ProxyTable, Local: true},
			{Dst: netip.MustParsePrefix("0.0.0.0/0"), Via: c.NodeInner.Addr(), Dev: c.ProxyDevice, Table: c.ProxyReplyTable}},
		// As on the node, the encapsulated reply keeps the inner mark: the
		// first rule keeps it out of the reply table.
		Rules: []Rule{{Dst: netip.PrefixFrom(c.NodeUnderlay, 32), Table: tableMain, Priority: c.RulePriority - 1},
			{Mark: c.ProxyMark, Mask: c.ProxyMark, Iif: c.ProxyDevice, Table: c.ProxyTable, Priority: c.RulePriority},
			{Mark: c.ProxyMark, Mask: c.ProxyMark, Table: c.ProxyReplyTable, Priority: c.RulePriority + 1}},
		Sysctls: []Sysctl{{"net.ipv4.conf." + c.ProxyDevice + ".rp_filter", "0"}, {"net.ipv4.tcp_fwmark_accept", "1"}},
		Iptables: &iptables.Ruleset{Prefix: c.ChainPrefix, V4: []iptables.Table{{Name: "mangle",
			Chains: []string{pre},
			Rules: []string{fmt.Sprintf("-A %s -i %s -p tcp -j TPROXY --on-port %d --on-ip 0.0.0.0 --tproxy-mark %s",
				pre, c.ProxyDevice, c.ProxyPort, pmark)},
			Jumps: []string{"-A PREROUTING -j " + pre}}}},
	}
	for _, p := range c.PodCIDRs {
		if p.Addr().Is4() {
			proxy.Routes = append(proxy.Routes, Route{Dst: p.Masked(), Via: c.NodeInner.Addr(), Dev: c.ProxyDevice})
		}
	}
	if c.IPv6 {
		addIPv6(c, &node, &proxy, nodeRules(false), pre, pmark)
	}
	return Desired{Node: node, Proxy: proxy}, nil
}

// addIPv6 adds the IPv6 half: the same marks, tables and chains as IPv4,
// with IPv6 addresses inside the tunnel. (The underlay rules stay IPv4
// only: the encapsulated packets are IPv4.)
func addIPv6(c Config, node, proxy *Side, nodeRules []string, pre, pmark string) {
	any6 := netip.MustParsePrefix("::/0")
	node.Addr6 = c.NodeInner6
	node.Routes = append(node.Routes, Route{Dst: any6, Via: c.ProxyInner6.Addr(), Dev: c.NodeDevice, Table: c.Table})
	node.Rules = append(node.Rules, Rule{Mark: c.Mark, Mask: c.Mark, Table: c.Table, Priority: c.RulePriority, V6: true})
	node.Iptables.V6 = []iptables.Table{{Name: "mangle", Chains: []string{pre}, Rules: nodeRules,
		Jumps: []string{"-A PREROUTING -j " + pre}}}
	proxy.Addr6 = c.ProxyInner6
	proxy.Routes = append(proxy.Routes, Route{Dst: any6, Dev: "lo", Table: c.ProxyTable, Local: true},
		Route{Dst: any6, Via: c.NodeInner6.Addr(), Dev: c.ProxyDevice, Table: c.ProxyReplyTable})
	proxy.Rules = append(proxy.Rules,
		Rule{Mark: c.ProxyMark, Mask: c.ProxyMark, Iif: c.ProxyDevice, Table: c.ProxyTable, Priority: c.RulePriority, V6: true},
		Rule{Mark: c.ProxyMark, Mask: c.ProxyMark, Table: c.ProxyReplyTable, Priority: c.RulePriority + 1, V6: true})
	proxy.Iptables.V6 = []iptables.Table{{Name: "mangle", Chains: []string{pre},
		Rules: []string{fmt.Sprintf("-A %s -i %s -p tcp -j TPROXY --on-port %d --on-ip :: --tproxy-mark %s",
			pre, c.ProxyDevice, c.ProxyPort, pmark)},
		Jumps: []string{"-A PREROUTING -j " + pre}}}
	for _, p := range c.PodCIDRs {
		if p.Addr().Is6() {
			proxy.Routes = append(proxy.Routes, Route{Dst: p.Masked(), Via: c.NodeInner6.Addr(), Dev: c.ProxyDevice})
		}
	}
}

// String renders a side as the ip and iptables commands that would make
// it, for golden files, dry runs and logs.
func (s Side) String() string {
	var b strings.Builder
	l := s.Link
	switch l.Kind {
	case KindVXLAN:
		fmt.Fprintf(&b, "ip link add %s type vxlan id %d local %s remote %s dstport %d", l.Name, l.VNI, l.Local, l.Remote, l.Port)
	default:
		fmt.Fprintf(&b, "ip link add %s type geneve id %d remote %s dstport %d", l.Name, l.VNI, l.Remote, l.Port)
	}
	if l.MTU > 0 {
		fmt.Fprintf(&b, " mtu %d", l.MTU)
	}
	fmt.Fprintf(&b, "\nip addr add %s dev %s\n", s.Addr, l.Name)
	if s.Addr6.IsValid() {
		fmt.Fprintf(&b, "ip addr add %s dev %s nodad\n", s.Addr6, l.Name)
	}
	fmt.Fprintf(&b, "ip link set %s up\n", l.Name)
	for _, r := range s.Routes {
		b.WriteString("ip route add " + r.String() + "\n")
	}
	for _, r := range s.Rules {
		b.WriteString("ip rule add " + r.String() + "\n")
	}
	for _, c := range s.Sysctls {
		fmt.Fprintf(&b, "sysctl -w %s=%s\n", c.Key, c.Value)
	}
	if s.EnrolChain != "" {
		b.WriteString("iptables -t mangle -N " + s.EnrolChain + " # if missing; rules per enrolled pod\n")
	}
	b.WriteString("iptables-restore --noflush <<EOF\n" + s.Iptables.Payload(iptables.V4) + "EOF\n")
	if s.Iptables.V6 != nil {
		b.WriteString("ip6tables-restore --noflush <<EOF\n" + s.Iptables.Payload(iptables.V6) + "EOF\n")
	}
	return b.String()
}

func (r Route) String() string {
	var b strings.Builder
	if r.Local {
		b.WriteString("local ")
	}
	b.WriteString(r.Dst.String())
	if r.Via.IsValid() {
		b.WriteString(" via " + r.Via.String())
	}
	b.WriteString(" dev " + r.Dev)
	if r.Table != 0 {
		fmt.Fprintf(&b, " table %d", r.Table)
	}
	return b.String()
}

func (r Rule) String() string {
	table := fmt.Sprint(r.Table)
	if r.Table == tableMain {
		table = "main"
	}
	if r.Dst.IsValid() {
		return fmt.Sprintf("to %s lookup %s priority %d", r.Dst, table, r.Priority)
	}
	iif := ""
	if r.Iif != "" {
		iif = " iif " + r.Iif
	}
	fam := ""
	if r.V6 {
		fam = "-6 "
	}
	return fmt.Sprintf("%sfwmark %#x/%#x%s lookup %s priority %d", fam, r.Mark, r.Mask, iif, table, r.Priority)
}
