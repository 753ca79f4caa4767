package rds

import (
	"iter"
	"slices"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/scope"
)

// applies reports whether an HTTP match condition of a VirtualService in
// namespace ns applies to routes served on port for this proxy and
// gateway: its port, gateways (short names are ns's, as istiod resolves
// them), source labels and source namespace.
func (b *routeBuilder) applies(ns string, m *networking.HTTPMatchRequest) bool {
	if m == nil {
		return true
	}
	if m.GetPort() != 0 && m.GetPort() != b.port {
		return false
	}
	if gws := m.GetGateways(); len(gws) > 0 && !config.GatewayNamed(gws, ns, b.gateway) {
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

// The match and its path wrapper are allocated as one block, one shape
// per kind of path: there is one match per route.
type (
	prefixMatch struct {
		rm     routev3.RouteMatch
		prefix routev3.RouteMatch_Prefix
	}
	pathMatch struct {
		rm   routev3.RouteMatch
		path routev3.RouteMatch_Path
	}
	regexMatch struct {
		rm    routev3.RouteMatch
		wrap  routev3.RouteMatch_SafeRegex
		regex matcherv3.RegexMatcher
	}
)

func routeMatch(m *networking.HTTPMatchRequest) *routev3.RouteMatch {
	if m == nil {
		return matchAll
	}
	switch u := m.GetUri().GetMatchType().(type) {
	case *networking.StringMatch_Exact:
		b := &pathMatch{path: routev3.RouteMatch_Path{Path: u.Exact}}
		b.rm.PathSpecifier = &b.path
		addConditions(&b.rm, m, nil, nil)
		return &b.rm
	case *networking.StringMatch_Regex:
		b := &regexMatch{regex: matcherv3.RegexMatcher{Regex: u.Regex}}
		b.wrap.SafeRegex = &b.regex
		b.rm.PathSpecifier = &b.wrap
		addConditions(&b.rm, m, nil, nil)
		return &b.rm
	}
	return (&prefixMatch{}).init(m, nil, nil)
}

// isPrefix reports whether m matches a path prefix (or any path): the
// matches prefixMatch holds.
func isPrefix(m *networking.HTTPMatchRequest) bool {
	switch m.GetUri().GetMatchType().(type) {
	case *networking.StringMatch_Exact, *networking.StringMatch_Regex:
		return false
	}
	return true
}

// init makes b the translation of m, for which isPrefix holds; hb and
// hp, if long enough, hold its header matchers (see addConditions).
func (b *prefixMatch) init(m *networking.HTTPMatchRequest, hb []headerBlock, hp []*routev3.HeaderMatcher) *routev3.RouteMatch {
	b.prefix.Prefix = "/"
	if p, ok := m.GetUri().GetMatchType().(*networking.StringMatch_Prefix); ok {
		b.prefix.Prefix = p.Prefix
	}
	b.rm.PathSpecifier = &b.prefix
	addConditions(&b.rm, m, hb, hp)
	return &b.rm
}

// caseInsensitive is CaseSensitive false, shared by every match that
// ignores case and never altered.
var caseInsensitive = gen.Bool(false)

// addConditions translates m's conditions but its path. Its header
// matchers are built in hb and listed in hp (zero length, capacity
// len(hb)) when they fit, else in new arrays.
func addConditions(rm *routev3.RouteMatch, m *networking.HTTPMatchRequest, hb []headerBlock, hp []*routev3.HeaderMatcher) {
	if m.GetIgnoreUriCase() {
		rm.CaseSensitive = caseInsensitive
	}
	if n := headerCount(m); n > 0 {
		if len(hb) < n {
			hb, hp = make([]headerBlock, n), make([]*routev3.HeaderMatcher, 0, n)
		}
		hs := headerMatchers{blocks: hb}
		rm.Headers = hp
		for name, sm := range sorted(m.GetHeaders()) {
			rm.Headers = append(rm.Headers, hs.next(name, sm, false))
		}
		for name, sm := range sorted(m.GetWithoutHeaders()) {
			rm.Headers = append(rm.Headers, hs.next(name, sm, true))
		}
		if m.GetMethod() != nil {
			rm.Headers = append(rm.Headers, hs.next(":method", m.GetMethod(), false))
		}
		if m.GetAuthority() != nil {
			rm.Headers = append(rm.Headers, hs.next(":authority", m.GetAuthority(), false))
		}
		if m.GetScheme() != nil {
			rm.Headers = append(rm.Headers, hs.next(":scheme", m.GetScheme(), false))
		}
	}
	if qs := m.GetQueryParams(); len(qs) > 0 {
		rm.QueryParameters = make([]*routev3.QueryParameterMatcher, 0, len(qs))
		for name, s := range sorted(qs) {
			q := &routev3.QueryParameterMatcher{Name: name}
			if sm := stringMatcher(s); sm != nil {
				q.QueryParameterMatchSpecifier = &routev3.QueryParameterMatcher_StringMatch{StringMatch: sm}
			} else {
				q.QueryParameterMatchSpecifier = &routev3.QueryParameterMatcher_PresentMatch{PresentMatch: true}
			}
			rm.QueryParameters = append(rm.QueryParameters, q)
		}
	}
}

// headerCount is the number of header matchers m makes.
func headerCount(m *networking.HTTPMatchRequest) int {
	n := len(m.GetHeaders()) + len(m.GetWithoutHeaders())
	for _, s := range []*networking.StringMatch{m.GetMethod(), m.GetAuthority(), m.GetScheme()} {
		if s != nil {
			n++
		}
	}
	return n
}

// headerBlock is a header matcher with the wrappers of its common
// specifiers, so that a match's matchers are allocated as one array.
type headerBlock struct {
	h      routev3.HeaderMatcher
	exact  routev3.HeaderMatcher_ExactMatch
	prefix routev3.HeaderMatcher_PrefixMatch
}

// presentMatch is a presence match, shared by every header matcher that
// asks for one and never altered.
var presentMatch = &routev3.HeaderMatcher_PresentMatch{PresentMatch: true}

// headerMatchers hands out the blocks of one match in order.
type headerMatchers struct {
	blocks []headerBlock
	used   int
}

// next is headerMatcher, built in the next block. It uses
// HeaderMatcher's exact/prefix/regex fields rather than string_match:
// they are deprecated in Envoy but still accepted by it, and gRPC C-core
// before 1.53 (Debian 12's python3-grpcio 1.51) rejects string_match
// ("Invalid route header matcher specified").
func (hs *headerMatchers) next(name string, s *networking.StringMatch, invert bool) *routev3.HeaderMatcher {
	b := &hs.blocks[hs.used]
	hs.used++
	h := &b.h
	h.Name, h.InvertMatch = name, invert
	switch u := s.GetMatchType().(type) {
	case *networking.StringMatch_Exact:
		//lint:ignore SA1019 see headerMatchers: gRPC C-core before 1.53 rejects string_match
		b.exact.ExactMatch = u.Exact
		h.HeaderMatchSpecifier = &b.exact
	case *networking.StringMatch_Prefix:
		if u.Prefix == "" { // any value: Envoy wants a non-empty prefix
			h.HeaderMatchSpecifier = presentMatch
		} else {
			//lint:ignore SA1019 see headerMatchers: gRPC C-core before 1.53 rejects string_match
			b.prefix.PrefixMatch = u.Prefix
			h.HeaderMatchSpecifier = &b.prefix
		}
	case *networking.StringMatch_Regex:
		//lint:ignore SA1019 see headerMatchers: gRPC C-core before 1.53 rejects string_match
		h.HeaderMatchSpecifier = &routev3.HeaderMatcher_SafeRegexMatch{SafeRegexMatch: &matcherv3.RegexMatcher{Regex: u.Regex}}
	default:
		h.HeaderMatchSpecifier = presentMatch
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

// sorted yields m's entries by key. Keys are sorted in a buffer on the
// stack when they fit; a map of one entry is not sorted at all, and an
// empty one starts no iterator.
func sorted[V any](m map[string]V) iter.Seq2[string, V] {
	return func(yield func(string, V) bool) {
		switch len(m) {
		case 0:
			return
		case 1:
			for k, v := range m {
				yield(k, v)
			}
			return
		}
		var buf [8]string
		keys := buf[:0]
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if !yield(k, m[k]) {
				return
			}
		}
	}
}
