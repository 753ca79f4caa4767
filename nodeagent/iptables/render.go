package iptables

import (
	"fmt"
	"net/netip"
	"strings"
)

// Family is an IP family: iptables (V4) or ip6tables (V6).
type Family int

// IP families.
const (
	V4 Family = 4
	V6 Family = 6
)

func (f Family) String() string {
	if f == V6 {
		return "ipv6"
	}
	return "ipv4"
}

// Table is the desired content of one iptables table: our chains, their
// rules, and the unconditional jumps from built-in chains into them.
type Table struct {
	Name   string
	Chains []string // our chains, in declaration order
	Rules  []string // "-A CHAIN ..." lines for our chains only
	Jumps  []string // "-A BUILTIN -j OURCHAIN" lines, appended to built-ins
}

// Route is TPROXY's policy routing: packets with Mark look up Table, which
// holds "local default dev lo".
type Route struct {
	Mark  uint32
	Table int
}

// Ruleset is the rendered, immutable desired state for both families.
type Ruleset struct {
	Prefix string
	V4, V6 []Table
	Route  *Route // nil unless TPROXY mode
}

// Tables returns the tables of one family.
func (r *Ruleset) Tables(f Family) []Table {
	if f == V6 {
		return r.V6
	}
	return r.V4
}

// Families returns the families this ruleset has rules for.
func (r *Ruleset) Families() []Family {
	if r.V6 == nil {
		return []Family{V4}
	}
	return []Family{V4, V6}
}

// Payload is the iptables-restore --noflush payload that installs the
// ruleset on a host that has none of it: what the golden files hold. The
// applier adapts the jump lines to what is already installed.
func (r *Ruleset) Payload(f Family) string {
	var b strings.Builder
	for _, t := range r.Tables(f) {
		fmt.Fprintf(&b, "*%s\n", t.Name)
		for _, c := range t.Chains {
			fmt.Fprintf(&b, ":%s - [0:0]\n", c)
		}
		for _, l := range t.Rules {
			b.WriteString(l + "\n")
		}
		for _, l := range t.Jumps {
			b.WriteString(l + "\n")
		}
		b.WriteString("COMMIT\n")
	}
	return b.String()
}

// Render validates cfg (after WithDefaults) and returns the desired rules.
// It is pure: no I/O, no clock.
// Render validates cfg (after WithDefaults) and returns the desired rules.
// It is pure: no I/O, no clock.
func Render(cfg Config) (*Ruleset, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	inAll, inPorts, _ := parseInboundPorts(cfg.InboundPorts)
	outAll, incl, _ := parseRanges("outboundIPRanges", cfg.OutboundIPRanges, true)
	_, excl, _ := parseRanges("outboundIPRangesExclude", cfg.OutboundIPRangesExclude, false)
	uids, _ := ParseIDs(cfg.ProxyUID)
	gids, _ := ParseIDs(cfg.ProxyGID)
	// A loopback range listed for capture (127.1.2.3/32) must not be
	// short-circuited by the loopback returns (istio-iptables drops them).
	loopIncl := false
	for _, p := range incl {
		loopIncl = loopIncl || p.Addr().IsLoopback()
	}
	rs := &Ruleset{Prefix: cfg.ChainPrefix}
	if cfg.Mode == ModeTProxy && (inAll || len(inPorts) > 0) {
		rs.Route = &Route{Mark: cfg.TProxyMark, Table: cfg.TProxyTable}
	}
	fams := []Family{V4}
	if !cfg.DisableIPv6 {
		fams = append(fams, V6)
	}
	for _, f := range fams {
		r := renderer{cfg: cfg, f: f, inAll: inAll, inPorts: inPorts, outAll: outAll,
			incl: only(f, incl), excl: only(f, excl), uids: uids, gids: gids, loopIncl: loopIncl,
			dns: cfg.dnsServers(f)}
		tables := r.tables()
		if f == V4 {
			rs.V4 = tables
		} else {
			rs.V6 = tables
		}
	}
	return rs, nil
}

func only(f Family, ps []netip.Prefix) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range ps {
		if p.Addr().Is4() == (f == V4) {
			out = append(out, p)
		}
	}
	return out
}

type renderer struct {
	cfg        Config
	f          Family
	inAll      bool
	inPorts    []int
	outAll     bool
	incl, excl []netip.Prefix
	uids, gids []string
	loopIncl   bool         // a loopback range is in outboundIPRanges
	dns        []netip.Addr // captured resolvers of this family
}

func (r *renderer) chain(name string) string { return r.cfg.ChainPrefix + "_" + name }

// loopback is the range treated as this host: hostLoopbackCIDR for IPv4.
func (r *renderer) loopback() string {
	if r.f == V6 {
		return "::1/128"
	}
	return netip.MustParsePrefix(r.cfg.HostLoopbackCIDR).Masked().String()
}

// passthroughSource is the source address Envoy uses for inbound
// passthrough connections to the app (istio's 127.0.0.6).
func (r *renderer) passthroughSource() string {
	if r.f == V6 {
		return "::6/128"
	}
	return "127.0.0.6/32"
}

func (r *renderer) inboundCaptured() bool { return r.inAll || len(r.inPorts) > 0 }

func (r *renderer) tables() []Table {
	var out []Table
	if m := r.mangle(); len(m.Rules) > 0 {
		out = append(out, m)
	}
	out = append(out, r.nat())
	if raw := r.raw(); len(raw.Rules) > 0 {
		out = append(out, raw)
	}
	return out
}

// inboundExclusions are the RETURN rules every inbound chain starts with.
func (r *renderer) inboundExclusions(chain string) []string {
	var rules []string
	if !r.cfg.CaptureSSH {
		rules = append(rules, fmt.Sprintf("-A %s -p tcp --dport %d -j RETURN", chain, sshPort))
	}
	rules = append(rules, fmt.Sprintf("-A %s -p tcp --dport %d -j RETURN", chain, r.cfg.InboundTunnelPort))
	for _, p := range r.cfg.InboundManagementPorts {
		rules = append(rules, fmt.Sprintf("-A %s -p tcp --dport %d -j RETURN", chain, p))
	}
	if r.inAll {
		for _, p := range r.cfg.InboundPortsExclude {
			rules = append(rules, fmt.Sprintf("-A %s -p tcp --dport %d -j RETURN", chain, p))
		}
	}
	return rules
}

// ownerFilter are the RETURN rules of the owner include/exclude lists.
func (r *renderer) ownerFilter(chain string) []string {
	var rules []string
	for _, o := range []struct {
		kind       string
		incl, excl []string
	}{{"uid", r.cfg.OwnerUsersInclude, r.cfg.OwnerUsersExclude}, {"gid", r.cfg.OwnerGroupsInclude, r.cfg.OwnerGroupsExclude}} {
		for _, id := range o.excl {
			rules = append(rules, fmt.Sprintf("-A %s -m owner --%s-owner %s -j RETURN", chain, o.kind, id))
		}
		if len(o.incl) > 0 {
			var m strings.Builder
			for _, id := range o.incl {
				fmt.Fprintf(&m, " -m owner ! --%s-owner %s", o.kind, id)
			}
			rules = append(rules, fmt.Sprintf("-A %s%s -j RETURN", chain, m.String()))
		}
	}
	return rules
}

func (r *renderer) nat() Table {
	t := Table{Name: "nat"}
	pre, inb, inRedir := r.chain("PREROUTING"), r.chain("INBOUND"), r.chain("IN_REDIRECT")
	out, redir := r.chain("OUTPUT"), r.chain("REDIRECT")
	add := func(format string, args ...any) { t.Rules = append(t.Rules, fmt.Sprintf(format, args...)) }

	redirectInbound := r.cfg.Mode == ModeRedirect && r.inboundCaptured()
	virt := r.cfg.RerouteVirtualInterfaces
	if redirectInbound || len(virt) > 0 {
		t.Chains = append(t.Chains, pre)
	}
	if redirectInbound {
		t.Chains = append(t.Chains, inb)
	}
	t.Chains = append(t.Chains, inRedir, out, redir)
	dnsTCP, dnsUDP := r.dnsCaptured()
	if dnsTCP {
		t.Chains = append(t.Chains, r.chain("OUTPUT_DNS"))
	}
	add("-A %s -p tcp -j REDIRECT --to-ports %d", inRedir, r.cfg.InboundPort)
	add("-A %s -p tcp -j REDIRECT --to-ports %d", redir, r.cfg.OutboundPort)

	if redirectInbound || len(virt) > 0 {
		t.Jumps = append(t.Jumps, "-A PREROUTING -j "+pre)
		for _, i := range r.cfg.ExcludeInterfaces {
			add("-A %s -i %s -j RETURN", pre, i)
		}
		// Traffic from a virtual interface (a VM's tap) is outbound
		// traffic of a workload behind it, as KUBE_VIRT_INTERFACES in
		// istio-iptables: to the outbound listener, never inbound.
		for _, i := range virt {
			if r.outAll {
				add("-A %s -i %s -p tcp -j %s", pre, i, redir)
			}
			for _, p := range r.incl {
				add("-A %s -i %s -d %s -p tcp -j %s", pre, i, p, redir)
			}
			add("-A %s -i %s -j RETURN", pre, i)
		}
	}
	if redirectInbound {
		add("-A %s -p tcp -j %s", pre, inb)
		// nat sees only a connection's first packet; one that is not a SYN
		// belongs to a connection opened before capture was installed
		// (picked up mid-stream by conntrack): leave it alone.
		add("-A %s -p tcp ! --syn -j RETURN", inb)
		t.Rules = append(t.Rules, r.inboundExclusions(inb)...)
		if r.inAll {
			add("-A %s -p tcp -j %s", inb, inRedir)
		}
		for _, p := range r.inPorts {
			add("-A %s -p tcp --dport %d -j %s", inb, p, inRedir)
		}
	}

	t.Jumps = append(t.Jumps, "-A OUTPUT -j "+out)
	for _, i := range r.cfg.ExcludeInterfaces {
		add("-A %s -o %s -j RETURN", out, i)
	}
	if dnsUDP {
		add("-A %s -p udp --dport %d -j %s", out, dnsPort, r.chain("OUTPUT_DNS"))
	}
	add("-A %s ! -p tcp -j RETURN", out)
	add("-A %s -p tcp ! --syn -j RETURN", out)
	for _, p := range r.cfg.OutboundPortsExclude {
		add("-A %s -p tcp --dport %d -j RETURN", out, p)
	}
	if r.cfg.Mode == ModeTProxy {
		// The proxy's inbound forwarding to the app carries the TPROXY mark
		// (and the client's address); it must not be captured again.
		add("-A %s -p tcp -m mark --mark %#x -j RETURN", out, r.cfg.TProxyMark)
	}
	add("-A %s -o lo -s %s -j RETURN", out, r.passthroughSource())
	notDNS, notOwn := "", fmt.Sprintf(" ! --dport %d", r.cfg.InboundTunnelPort)
	if r.cfg.CaptureDNS {
		notDNS = " ! --dport 53"
		notOwn = fmt.Sprintf(" -m multiport ! --dports 53,%d", r.cfg.InboundTunnelPort)
	}
	for _, o := range []struct {
		kind string
		ids  []string
	}{{"uid", r.uids}, {"gid", r.gids}} {
		// The proxy's connections to this host's own addresses over lo
		// go to its inbound listener (app -> proxy -> proxy -> app).
		if r.inboundCaptured() {
			for _, id := range o.ids {
				add("-A %s ! -d %s -o lo -p tcp%s -m owner --%s-owner %s -j %s", out, r.loopback(), notOwn, o.kind, id, inRedir)
			}
		}
		// Anyone else's over lo go straight (unless a loopback range is
		// listed for capture).
		if !r.loopIncl {
			var m strings.Builder
			for _, id := range o.ids {
				fmt.Fprintf(&m, " -m owner ! --%s-owner %s", o.kind, id)
			}
			add("-A %s -o lo -p tcp%s%s -j RETURN", out, notDNS, m.String())
		}
		for _, id := range o.ids {
			add("-A %s -m owner --%s-owner %s -j RETURN", out, o.kind, id)
		}
	}
	t.Rules = append(t.Rules, r.ownerFilter(out)...)
	if dnsTCP {
		add("-A %s -p tcp --dport %d -j %s", out, dnsPort, r.chain("OUTPUT_DNS"))
		t.Rules = append(t.Rules, r.natDNS()...)
	}
	add("-A %s -d %s -j RETURN", out, r.loopback())
	for _, p := range r.excl {
		add("-A %s -d %s -j RETURN", out, p)
	}
	for _, p := range r.cfg.OutboundPortsInclude {
		add("-A %s -p tcp --dport %d -j %s", out, p, redir)
	}
	if r.outAll {
		add("-A %s -j %s", out, redir)
	}
	for _, p := range r.incl {
		add("-A %s -d %s -j %s", out, p, redir)
	}
	return t
}

func (r *renderer) mangle() Table {
	t := Table{Name: "mangle"}
	tproxy := r.cfg.Mode == ModeTProxy && r.inboundCaptured()
	if !tproxy && !r.cfg.DropInvalid {
		return t
	}
	pre := r.chain("PREROUTING")
	add := func(format string, args ...any) { t.Rules = append(t.Rules, fmt.Sprintf(format, args...)) }
	t.Chains = append(t.Chains, pre)
	t.Jumps = append(t.Jumps, "-A PREROUTING -j "+pre)
	// As istio-iptables: excluded interfaces skip mangle (and with it the
	// invalid-packet drop) only in TPROXY mode; in REDIRECT mode invalid
	// packets are dropped on every interface.
	if r.cfg.Mode == ModeTProxy {
		for _, i := range r.cfg.ExcludeInterfaces {
			add("-A %s -i %s -j RETURN", pre, i)
		}
	}
	if r.cfg.DropInvalid {
		add("-A %s -m conntrack --ctstate INVALID -j DROP", pre)
	}
	if !tproxy {
		return t
	}
	inb, divert, tp, out := r.chain("INBOUND"), r.chain("DIVERT"), r.chain("TPROXY"), r.chain("OUTPUT")
	mark := fmt.Sprintf("%#x", r.cfg.TProxyMark)
	t.Chains = append(t.Chains, inb, divert, tp, out)
	t.Jumps = append(t.Jumps, "-A OUTPUT -j "+out)
	add("-A %s -p tcp -j %s", pre, inb)
	add("-A %s -p tcp -m mark --mark %s -j CONNMARK --save-mark --nfmask 0xffffffff --ctmask 0xffffffff", pre, mark)
	// Traffic arriving over loopback is local: the proxy's own forwarding
	// to the app, never a new inbound connection to capture.
	add("-A %s -i lo -j RETURN", inb)
	t.Rules = append(t.Rules, r.inboundExclusions(inb)...)
	onIP := "0.0.0.0"
	if r.f == V6 {
		onIP = "::"
	}
	capture := func(dport string) {
		add("-A %s -p tcp%s -m conntrack --ctstate RELATED,ESTABLISHED -j %s", inb, dport, divert)
		// Not a SYN and not ESTABLISHED: a connection older than capture.
		add("-A %s -p tcp%s ! --syn -j RETURN", inb, dport)
		add("-A %s -p tcp%s -j %s", inb, dport, tp)
	}
	if r.inAll {
		capture("")
	}
	for _, p := range r.inPorts {
		capture(fmt.Sprintf(" --dport %d", p))
	}
	add("-A %s -j MARK --set-xmark %s/0xffffffff", divert, mark)
	add("-A %s -j ACCEPT", divert)
	add("-A %s ! -d %s -p tcp -j TPROXY --on-port %d --on-ip %s --tproxy-mark %s/0xffffffff",
		tp, r.loopback(), r.cfg.InboundPort, onIP, mark)
	add("-A %s -p tcp -m connmark --mark %s -j CONNMARK --restore-mark --nfmask 0xffffffff --ctmask 0xffffffff", out, mark)
	return t
}
