package lds

import (
	"slices"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	originalsrcv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/original_src/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"

	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/xdsserver/gen"
)

// Wildcard addresses of listeners that do not bind a service address.
const (
	wildcardIPv4 = "0.0.0.0"
	wildcardIPv6 = "::"
)

// setAddresses gives a wildcard listener on port the addresses of the
// proxy's families, as istiod with ISTIO_DUAL_STACK: 0.0.0.0 for an IPv4
// (or address-less) proxy, :: for an IPv6-only one, both (:: as an
// additional address) for a dual-stack one, so IPv6 connections the
// agent captures have a listener.
func setAddresses(l *listenerv3.Listener, p *model.Proxy, port uint32) {
	v4, v6 := p.IPFamilies()
	switch {
	case v6 && !v4:
		l.Address = gen.SocketAddress(wildcardIPv6, port)
	case v6:
		l.Address = gen.SocketAddress(wildcardIPv4, port)
		l.AdditionalAddresses = []*listenerv3.AdditionalAddress{{Address: gen.SocketAddress(wildcardIPv6, port)}}
	default:
		l.Address = gen.SocketAddress(wildcardIPv4, port)
	}
}

// dualStack reports whether the proxy has addresses of both families.
func dualStack(p *model.Proxy) bool {
	v4, v6 := p.IPFamilies()
	return v4 && v6
}

// sharedOriginalSrc is the original_src listener filter of TPROXY
// interception (packets marked 1337, as Istio's iptables rules expect).
var sharedOriginalSrc = &listenerv3.ListenerFilter{Name: "envoy.filters.listener.original_src", ConfigType: &listenerv3.ListenerFilter_TypedConfig{
	TypedConfig: gen.MustAny(&originalsrcv3.OriginalSrc{Mark: 1337}),
}}

// inspectorNeeds is which inspectors a destination port's chains need.
type inspectorNeeds struct{ tls, http bool }

// inboundListenerFilters are virtualInbound's listener filters, as
// istiod's populateListenerFilters: original_dst, original_src under
// TPROXY, then the TLS inspector where some chain of a port matches a
// transport protocol "tls", and the HTTP inspector where some chain
// matches a plaintext HTTP ALPN, each disabled for the ports that need
// it not (port 0 stands for the catch-all chains).
func inboundListenerFilters(chains []*listenerv3.FilterChain, tproxy bool) []*listenerv3.ListenerFilter {
	out := []*listenerv3.ListenerFilter{originalDst()}
	if tproxy {
		out = append(out, sharedOriginalSrc)
	}
	needs := map[uint32]inspectorNeeds{}
	var anyTLS, anyHTTP bool
	for _, fc := range chains {
		m := fc.GetFilterChainMatch()
		port := m.GetDestinationPort().GetValue()
		n := needs[port]
		n.tls = n.tls || m.GetTransportProtocol() == "tls"
		n.http = n.http || slices.ContainsFunc(m.GetApplicationProtocols(), func(a string) bool { return a == "http/1.1" || a == "h2c" })
		needs[port] = n
		anyTLS, anyHTTP = anyTLS || n.tls, anyHTTP || n.http
	}
	if anyTLS {
		// Enabled for the catch-all: disabled where a port needs it not;
		// else enabled only where a port needs it.
		def := needs[0].tls
		var ports []uint32
		for p, n := range needs {
			if p != 0 && n.tls != def {
				ports = append(ports, p)
			}
		}
		out = append(out, withDisabled(tlsInspector(), ports, !def))
	}
	if anyHTTP {
		var ports []uint32
		for p, n := range needs {
			if !n.http {
				ports = append(ports, p)
			}
		}
		out = append(out, withDisabled(httpInspector(), ports, false))
	}
	return out
}

// withDisabled is the shared filter f disabled for ports (or, with
// invert, for every port but those).
func withDisabled(f *listenerv3.ListenerFilter, ports []uint32, invert bool) *listenerv3.ListenerFilter {
	if len(ports) == 0 {
		return f
	}
	slices.Sort(ports)
	rules := make([]*listenerv3.ListenerFilterChainMatchPredicate, 0, len(ports))
	for _, p := range ports {
		rules = append(rules, &listenerv3.ListenerFilterChainMatchPredicate{Rule: &listenerv3.ListenerFilterChainMatchPredicate_DestinationPortRange{
			DestinationPortRange: &typev3.Int32Range{Start: int32(p), End: int32(p) + 1},
		}})
	}
	pred := rules[0]
	if len(rules) > 1 {
		pred = &listenerv3.ListenerFilterChainMatchPredicate{Rule: &listenerv3.ListenerFilterChainMatchPredicate_OrMatch{
			OrMatch: &listenerv3.ListenerFilterChainMatchPredicate_MatchSet{Rules: rules},
		}}
	}
	if invert {
		pred = &listenerv3.ListenerFilterChainMatchPredicate{Rule: &listenerv3.ListenerFilterChainMatchPredicate_NotMatch{NotMatch: pred}}
	}
	return &listenerv3.ListenerFilter{Name: f.Name, ConfigType: f.ConfigType, FilterDisabled: pred}
}
