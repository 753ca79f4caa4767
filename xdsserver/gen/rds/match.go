package rds

import (
	"slices"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/scope"
)

// applies reports whether an HTTP match condition applies to routes
// served on port for this proxy and gateway: its port, gateways, source
// labels and source namespace.
func (b *routeBuilder) applies(m *networking.HTTPMatchRequest) bool {
	if m == nil {
		return true
	}
	if m.GetPort() != 0 && m.GetPort() != b.port {
		return false
	}
	if gws := m.GetGateways(); len(gws) > 0 && !slices.Contains(gws, b.gateway) {
		return false
	}
	if b.gateway == "mesh" && !scope.LabelsMatch(m.GetSourceLabels(), b.v.Proxy.Labels) {
		return false
	}
	if ns := m.GetSourceNamespace(); ns != "" && ns != b.v.Proxy.Namespace {
		return false
	}
	return true
}

// routeMatch translates one HTTPMatchRequest (nil: everything).
// matchAll is the match of a route without conditions. It is shared by
// every such route of every output and never altered.
var matchAll = &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}}

func routeMatch(m *networking.HTTPMatchRequest) *routev3.RouteMatch {
	if m == nil {
		return matchAll
	}
	// The match and its prefix wrapper, the common case, are allocated as
	// one block: there is one per route.
	b := &struct {
		rm     routev3.RouteMatch
		prefix routev3.RouteMatch_Prefix
	}{prefix: routev3.RouteMatch_Prefix{Prefix: "/"}}
	rm := &b.rm
	rm.PathSpecifier = &b.prefix
	switch u := m.GetUri().GetMatchType().(type) {
	case *networking.StringMatch_Exact:
		rm.PathSpecifier = &routev3.RouteMatch_Path{Path: u.Exact}
	case *networking.StringMatch_Prefix:
		b.prefix.Prefix = u.Prefix
	case *networking.StringMatch_Regex:
		rm.PathSpecifier = &routev3.RouteMatch_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: u.Regex}}
	}
	if m.GetIgnoreUriCase() {
		rm.CaseSensitive = gen.Bool(false)
	}
	for _, name := range sortedKeys(m.GetHeaders()) {
		rm.Headers = append(rm.Headers, headerMatcher(name, m.GetHeaders()[name], false))
	}
	for _, name := range sortedKeys(m.GetWithoutHeaders()) {
		rm.Headers = append(rm.Headers, headerMatcher(name, m.GetWithoutHeaders()[name], true))
	}
	if m.GetMethod() != nil {
		rm.Headers = append(rm.Headers, headerMatcher(":method", m.GetMethod(), false))
	}
	if m.GetAuthority() != nil {
		rm.Headers = append(rm.Headers, headerMatcher(":authority", m.GetAuthority(), false))
	}
	if m.GetScheme() != nil {
		rm.Headers = append(rm.Headers, headerMatcher(":scheme", m.GetScheme(), false))
	}
	for _, name := range sortedKeys(m.GetQueryParams()) {
		q := &routev3.QueryParameterMatcher{Name: name}
		if sm := stringMatcher(m.GetQueryParams()[name]); sm != nil {
			q.QueryParameterMatchSpecifier = &routev3.QueryParameterMatcher_StringMatch{StringMatch: sm}
		} else {
			q.QueryParameterMatchSpecifier = &routev3.QueryParameterMatcher_PresentMatch{PresentMatch: true}
		}
		rm.QueryParameters = append(rm.QueryParameters, q)
	}
	return rm
}

// headerMatcher uses HeaderMatcher's exact/prefix/regex fields rather
// than string_match: they are deprecated in Envoy but still accepted by
// it, and gRPC C-core before 1.53 (Debian 12's python3-grpcio 1.51)
// rejects string_match ("Invalid route header matcher specified").
func headerMatcher(name string, s *networking.StringMatch, invert bool) *routev3.HeaderMatcher {
	h := &routev3.HeaderMatcher{Name: name, InvertMatch: invert}
	switch u := s.GetMatchType().(type) {
	case *networking.StringMatch_Exact:
		h.HeaderMatchSpecifier = &routev3.HeaderMatcher_ExactMatch{ExactMatch: u.Exact}
	case *networking.StringMatch_Prefix:
		if u.Prefix == "" { // any value: Envoy wants a non-empty prefix
			h.HeaderMatchSpecifier = &routev3.HeaderMatcher_PresentMatch{PresentMatch: true}
		} else {
			h.HeaderMatchSpecifier = &routev3.HeaderMatcher_PrefixMatch{PrefixMatch: u.Prefix}
		}
	case *networking.StringMatch_Regex:
		h.HeaderMatchSpecifier = &routev3.HeaderMatcher_SafeRegexMatch{SafeRegexMatch: &matcherv3.RegexMatcher{Regex: u.Regex}}
	default:
		h.HeaderMatchSpecifier = &routev3.HeaderMatcher_PresentMatch{PresentMatch: true}
	}
	return h
}

// stringMatcher translates a StringMatch; nil when it sets nothing (a
// presence match).
func stringMatcher(s *networking.StringMatch) *matcherv3.StringMatcher {
	switch u := s.GetMatchType().(type) {
	case *networking.StringMatch_Exact:
		return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: u.Exact}}
	case *networking.StringMatch_Prefix:
		if u.Prefix == "" {
			return nil
		}
		return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: u.Prefix}}
	case *networking.StringMatch_Regex:
		return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: u.Regex}}}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
