package lds

import (
	"net/netip"
	"slices"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"

	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/scope"
)

// outEntry is an outbound listener being built from the HTTP, TCP and
// auto-detected service ports that share it, as istiod's
// outboundListenerEntry: its chains, and the protocol that decides how
// the next service merges (the first port's; model.Unsupported once
// sniffed, which an HTTP port on 0.0.0.0 always is).
type outEntry struct {
	l        *listenerv3.Listener
	protocol model.Protocol
	chains   []outChain
}

// outChain is one chain of an outEntry: its destination CIDRs (none:
// every destination), its server names (a TLS service's) and whether it
// is the HTTP chain (selected by the HTTP inspector's application
// protocols).
type outChain struct {
	cidrs []string
	sni   []string // a TLS service's host, matched by the TLS inspector
	http  bool
	fc    *listenerv3.FilterChain
}

// conflicts: istiod's filterChainOpts.conflictsWith for our chains.
func (c outChain) conflicts(o outChain) bool {
	return c.http == o.http && slices.Equal(c.cidrs, o.cidrs) && slices.Equal(c.sni, o.sni)
}

// add merges the chains of svc's port p, as istiod's
// buildSidecarOutboundListener decides by the port's listener protocol
// lp and the entry's protocol: a fresh entry takes them; HTTP over TCP,
// TCP over HTTP or auto, and auto over TCP merge (the entry is sniffed
// from then on); auto or HTTP over a sniffed entry adds nothing. The
// services come oldest first, so which of an HTTP and an auto-detected
// service on one wildcard port was created first decides the default
// chain: the auto one's TCP chain, or (HTTP first) the fallthrough. A
// MongoDB or MySQL port shares a listener only with its own protocol
// (istiod's isConflictWithWellKnownPort: the inspector would break these
// server-first protocols).
func (e *outEntry) add(v *scope.View, opts hcmOpts, svc *model.Service, p model.Port, lp scope.Listen, addr, bind string, cidrs []string, fresh bool) {
	if !fresh && wellKnown(p.Protocol, e.protocol) {
		return
	}
	tcp := func() []outChain { return tcpChains(v, svc, p, cidrs) } // outbound.go
	http := func() outChain {
		// With an address the service has its own route config
		// "host:port"; without, HTTP goes by the port's shared one,
		// "PORT" (istiod names it so on a wildcard bind).
		route := gen.PortName(p.Number)
		if lp == scope.ListenAuto && addr != "" {
			route = gen.HostPort(svc.Hostname, p.Number)
		}
		return outChain{http: true, fc: &listenerv3.FilterChain{
			FilterChainMatch: &listenerv3.FilterChainMatch{TransportProtocol: "raw_buffer", ApplicationProtocols: plaintextHTTPALPNs},
			Filters:          []*listenerv3.Filter{rdsFilter(opts, "outbound_"+bind+"_"+gen.PortName(p.Number), route)},
		}}
	}
	var in []outChain
	switch lp {
	case scope.ListenTLS:
		in = tlsChains(v, svc, p, addr, cidrs) // l4route.go
		if !fresh && e.protocol.IsHTTP() {
			e.protocol = model.Unsupported
		}
	case scope.ListenHTTP:
		if !fresh && e.protocol != model.Unsupported && !e.protocol.IsHTTP() {
			in = []outChain{http()} // HTTP over TCP
			e.protocol = model.Unsupported
		} else if fresh {
			in = []outChain{http()}
			e.protocol = model.Unsupported // on 0.0.0.0: sniffed, with a fallthrough
		}
	case scope.ListenTCP:
		in = tcp()
		if !fresh && e.protocol.IsHTTP() {
			e.protocol = model.Unsupported
		}
	case scope.ListenAuto:
		switch {
		case fresh:
			in = append(tcp(), http())
			e.protocol = model.Unsupported
		case e.protocol == model.Unsupported:
			// Auto over auto or a sniffed HTTP port: istiod keeps the
			// entry as it is ("listener already exists"), so the
			// older service's chains decide, even where this one's
			// TCP chain would be the match-all default.
		default: // auto over TCP (over HTTP cannot happen: HTTP is sniffed)
			in = append(tcp(), http())
			e.protocol = model.Unsupported
		}
	}
	for _, c := range in {
		if !slices.ContainsFunc(e.chains, c.conflicts) {
			e.chains = append(e.chains, c)
		}
	}
}

// wellKnown reports a merge istiod refuses: MongoDB or MySQL with
// another protocol.
func wellKnown(incoming, existing model.Protocol) bool {
	return (incoming == model.Mongo || incoming == model.MySQL || existing == model.Mongo || existing == model.MySQL) && incoming != existing
}

// assemble sets the listener's chains as istiod's buildListenerFromEntry:
// the match-all chain is the default chain, unless it is the only chain;
// without one, the default is the fallthrough; the HTTP inspector runs
// where an HTTP chain needs it.
func (e *outEntry) assemble(passthrough *listenerv3.FilterChain) {
	l := e.l
	tls, http := false, false
	for _, c := range e.chains {
		tls, http = tls || len(c.sni) > 0, http || c.http
		if !c.http && len(c.cidrs) == 0 && len(c.sni) == 0 {
			l.DefaultFilterChain = c.fc
			continue
		}
		if len(c.cidrs) > 0 {
			m := c.fc.GetFilterChainMatch()
			if m == nil {
				m = &listenerv3.FilterChainMatch{}
				c.fc.FilterChainMatch = m
			}
			for _, cidr := range c.cidrs {
				if r := cidrRange(cidr); r != nil {
					m.PrefixRanges = append(m.PrefixRanges, r)
				}
			}
		}
		l.FilterChains = append(l.FilterChains, c.fc)
	}
	// As istiod: the TLS inspector first, then the HTTP inspector.
	if tls {
		l.ListenerFilters = append(l.ListenerFilters, tlsInspector())
	}
	if http {
		l.ListenerFilters = append(l.ListenerFilters, httpInspector())
	}
	switch {
	case l.DefaultFilterChain != nil && len(l.FilterChains) == 0:
		l.FilterChains, l.DefaultFilterChain = []*listenerv3.FilterChain{l.DefaultFilterChain}, nil
	case l.DefaultFilterChain == nil:
		l.DefaultFilterChain = passthrough
	}
}

// cidrRange is a destination CIDR ("10.0.0.0/8", or an address: a host
// prefix) as a filter chain match range, nil when it does not parse or
// is unspecified (istiod's ConvertAddressToCidr).
func cidrRange(s string) *corev3.CidrRange {
	pfx, err := netip.ParsePrefix(s)
	if err != nil {
		a, aerr := netip.ParseAddr(s)
		if aerr != nil {
			return nil
		}
		pfx = netip.PrefixFrom(a, a.BitLen())
	}
	if pfx.Addr().IsUnspecified() {
		return nil
	}
	return &corev3.CidrRange{AddressPrefix: pfx.Addr().String(), PrefixLen: wrapperspb.UInt32(uint32(pfx.Bits()))}
}
