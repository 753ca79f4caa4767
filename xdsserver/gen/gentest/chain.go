package gentest

import (
	"slices"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
)

// Conn is a downstream connection as a listener's filter chain match
// sees it. There is no Envoy here, so MatchChain stands in for its
// filter chain selection: it is written from Envoy's documented rules
// (FilterChainMatch: destination port, then transport protocol, then
// application protocols, the most specific match winning at each step;
// listener filters setting the transport protocol and ALPN), and it covers
// only the criteria our listeners use.
type Conn struct {
	Port uint32
	// TLS: the client starts with a TLS ClientHello offering ALPN.
	TLS  bool
	ALPN []string
	// HTTP is the plaintext protocol the HTTP inspector would find
	// ("http/1.1", "h2c"), "" for none.
	HTTP string
}

// MatchChain returns the chain of l that Envoy would hand c to: nil when
// the connection is closed (no chain matches and there is no default).
func MatchChain(l *listenerv3.Listener, c Conn) *listenerv3.FilterChain {
	transport, alpn := "raw_buffer", []string(nil)
	if c.TLS && filterEnabled(l, "envoy.filters.listener.tls_inspector", c.Port) {
		transport, alpn = "tls", c.ALPN
	}
	if !c.TLS && c.HTTP != "" && filterEnabled(l, "envoy.filters.listener.http_inspector", c.Port) {
		alpn = []string{c.HTTP}
	}
	cands := l.GetFilterChains()
	// Destination port: chains naming the port beat chains naming none.
	cands = mostSpecific(cands, func(m *listenerv3.FilterChainMatch) (bool, bool) {
		p := m.GetDestinationPort()
		return p == nil, p != nil && p.GetValue() == c.Port
	})
	cands = mostSpecific(cands, func(m *listenerv3.FilterChainMatch) (bool, bool) {
		return m.GetTransportProtocol() == "", m.GetTransportProtocol() == transport
	})
	cands = mostSpecific(cands, func(m *listenerv3.FilterChainMatch) (bool, bool) {
		aps := m.GetApplicationProtocols()
		return len(aps) == 0, slices.ContainsFunc(aps, func(a string) bool { return slices.Contains(alpn, a) })
	})
	if len(cands) == 0 {
		return l.GetDefaultFilterChain()
	}
	return cands[0]
}

// mostSpecific keeps the chains that match exactly when any does, else
// those that do not constrain the criterion (wild), else none.
func mostSpecific(fcs []*listenerv3.FilterChain, test func(*listenerv3.FilterChainMatch) (wild, exact bool)) []*listenerv3.FilterChain {
	var exact, wild []*listenerv3.FilterChain
	for _, fc := range fcs {
		w, e := test(fc.GetFilterChainMatch())
		switch {
		case e:
			exact = append(exact, fc)
		case w:
			wild = append(wild, fc)
		}
	}
	if len(exact) > 0 {
		return exact
	}
	return wild
}

// filterEnabled reports whether the listener filter name runs for a
// connection to port: present, and not disabled by a destination port
// predicate.
func filterEnabled(l *listenerv3.Listener, name string, port uint32) bool {
	for _, f := range l.GetListenerFilters() {
		if f.GetName() == name {
			return !predicate(f.GetFilterDisabled(), port)
		}
	}
	return false
}

// predicate evaluates the destination port parts of a listener filter
// predicate (nil: false, the filter is not disabled).
func predicate(p *listenerv3.ListenerFilterChainMatchPredicate, port uint32) bool {
	if p == nil {
		return false
	}
	switch r := p.GetRule().(type) {
	case *listenerv3.ListenerFilterChainMatchPredicate_DestinationPortRange:
		return int32(port) >= r.DestinationPortRange.GetStart() && int32(port) < r.DestinationPortRange.GetEnd()
	case *listenerv3.ListenerFilterChainMatchPredicate_OrMatch:
		for _, q := range r.OrMatch.GetRules() {
			if predicate(q, port) {
				return true
			}
		}
		return false
	case *listenerv3.ListenerFilterChainMatchPredicate_NotMatch:
		return !predicate(r.NotMatch, port)
	case *listenerv3.ListenerFilterChainMatchPredicate_AnyMatch:
		return true
	}
	return false
}
