package iptables

import (
	"fmt"
	"net/netip"
	"slices"
)

// dnsCaptured says whether this family captures TCP and UDP DNS: only
// with captureDNS and a resolver of the family to capture (or
// captureAllDNS); UDP not when port 53 is an excluded outbound port (TCP
// 53 is then excluded by the port's own TCP rule).
func (r *renderer) dnsCaptured() (tcp, udp bool) {
	tcp = r.cfg.CaptureDNS && (r.cfg.CaptureAllDNS || len(r.dns) > 0)
	return tcp, tcp && !slices.Contains(r.cfg.OutboundPortsExclude, dnsPort)
}

func (r *renderer) host(a netip.Addr) string { return netip.PrefixFrom(a, a.BitLen()).String() }

// natDNS is the nat OUTPUT_DNS chain: queries (TCP or UDP port 53) of
// anyone but the proxy and the owners left out by the owner filters, to a
// captured resolver, go to the proxy's DNS port. Queries to other servers
// are left alone: a local forwarder (systemd-resolved, dnsmasq) that
// resolv.conf points to sends its upstream queries to servers that are
// not in the list, so they never come back to the proxy in a loop.
func (r *renderer) natDNS() []string {
	c := r.chain("OUTPUT_DNS")
	var rules []string
	add := func(format string, args ...any) { rules = append(rules, fmt.Sprintf(format, args...)) }
	for _, id := range r.uids {
		add("-A %s -m owner --uid-owner %s -j RETURN", c, id)
	}
	for _, id := range r.gids {
		add("-A %s -m owner --gid-owner %s -j RETURN", c, id)
	}
	rules = append(rules, r.ownerFilter(c)...)
	if r.cfg.CaptureAllDNS {
		add("-A %s -p udp -j REDIRECT --to-ports %d", c, r.cfg.DNSPort)
		add("-A %s -p tcp -j REDIRECT --to-ports %d", c, r.cfg.DNSPort)
		return rules
	}
	for _, a := range r.dns {
		add("-A %s -d %s -p udp -j REDIRECT --to-ports %d", c, r.host(a), r.cfg.DNSPort)
		add("-A %s -d %s -p tcp -j REDIRECT --to-ports %d", c, r.host(a), r.cfg.DNSPort)
	}
	return rules
}

// raw keeps UDP DNS flows in two conntrack zones, as istio-iptables'
// addDNSConntrackZones: the proxy's upstream queries (and the resolvers'
// answers) in zone 1, the apps' queries to a captured resolver (and the
// proxy's answers from its DNS port) in zone 2. Without them a UDP source
// port reused within the conntrack timeout joins the other side's flow:
// the proxy's upstream query is redirected back to the proxy, or an app's
// query skips it.
func (r *renderer) raw() Table {
	t := Table{Name: "raw"}
	if _, udp := r.dnsCaptured(); !udp {
		return t
	}
	out, in := r.chain("OUTPUT_DNS"), r.chain("INBOUND_DNS")
	t.Chains = []string{out, in}
	t.Jumps = []string{"-A OUTPUT -j " + out, "-A PREROUTING -j " + in}
	add := func(format string, args ...any) { t.Rules = append(t.Rules, fmt.Sprintf(format, args...)) }
	for _, o := range []struct {
		kind string
		ids  []string
	}{{"uid", r.uids}, {"gid", r.gids}} {
		for _, id := range o.ids {
			add("-A %s -p udp --dport %d -m owner --%s-owner %s -j CT --zone 1", out, dnsPort, o.kind, id)
			add("-A %s -p udp --sport %d -m owner --%s-owner %s -j CT --zone 2", out, r.cfg.DNSPort, o.kind, id)
		}
	}
	if r.cfg.CaptureAllDNS {
		add("-A %s -p udp --dport %d -j CT --zone 2", out, dnsPort)
		add("-A %s -p udp --sport %d -j CT --zone 1", in, dnsPort)
		return t
	}
	for _, a := range r.dns {
		add("-A %s -d %s -p udp --dport %d -j CT --zone 2", out, r.host(a), dnsPort)
		add("-A %s -s %s -p udp --sport %d -j CT --zone 1", in, r.host(a), dnsPort)
	}
	return t
}
