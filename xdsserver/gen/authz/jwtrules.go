package authz

import (
	"strings"

	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
)

// The jwt_authn filter writes a verified token's payload into its dynamic
// metadata under this key; rules on request principals and claims match
// there, as istiod's do. A request without a verified token has no such
// metadata: a rule on it does not match.
const (
	JWTFilterName = "envoy.filters.http.jwt_authn"
	jwtPayloadKey = "payload"
)

// requestPrincipalID matches a request principal "ISS/SUB" (the last
// '/' splits them, an issuer may be a URL) on the token's iss and sub
// claims; '*' alone is any, a leading '*' a suffix of the issuer (or of
// the whole value when it has no '/'), a trailing one a prefix of the
// subject (or of the whole value), as istiod builds it.
func requestPrincipalID(v string) *rbacv3.Principal {
	idx := strings.LastIndex(v, "/")
	found := idx >= 0
	iss, sub := v, ""
	if found {
		iss, sub = v[:idx], v[idx+1:]
	}
	exact := func(s string) *matcherv3.StringMatcher {
		return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: s}}
	}
	var mi, ms *matcherv3.StringMatcher
	switch {
	case v == "*":
		mi, ms = regexMatch(".+"), regexMatch(".+")
	case strings.HasPrefix(v, "*"):
		if found {
			if iss == "*" {
				mi = regexMatch(".+")
			} else {
				mi = &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Suffix{Suffix: iss[1:]}}
			}
			ms = exact(sub)
		} else {
			mi = regexMatch(".+")
			ms = &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Suffix{Suffix: v[1:]}}
		}
	case strings.HasSuffix(v, "*"):
		if found {
			mi = exact(iss)
			if sub == "*" {
				ms = regexMatch(".+")
			} else {
				ms = &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: strings.TrimSuffix(sub, "*")}}
			}
		} else {
			mi = &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: strings.TrimSuffix(v, "*")}}
			ms = regexMatch(".+")
		}
	default:
		mi, ms = exact(iss), exact(sub)
	}
	return andID([]*rbacv3.Principal{claimID("iss", mi), claimID("sub", ms)})
}

// claimID matches one top-level claim's string value.
func claimID(claim string, m *matcherv3.StringMatcher) *rbacv3.Principal {
	//lint:ignore SA1019 what istiod sets (principal.go); parity
	return &rbacv3.Principal{Identifier: &rbacv3.Principal_Metadata{Metadata: &matcherv3.MetadataMatcher{
		Filter: JWTFilterName,
		Path:   metadataPath(jwtPayloadKey, claim),
		Value:  &matcherv3.ValueMatcher{MatchPattern: &matcherv3.ValueMatcher_StringMatch{StringMatch: m}},
	}}}
}

// claimsID matches the claim at path against values (any of them) and
// none of nots (the parts to be AND-ed); a claim may be a string or a
// list of strings (one of which matches), as istiod's extended JWT
// matcher.
func claimsID(path []string, vals, nots []string) []*rbacv3.Principal {
	var and []*rbacv3.Principal
	if len(vals) > 0 {
		and = append(and, claimValuesID(path, vals))
	}
	if len(nots) > 0 {
		and = append(and, &rbacv3.Principal{Identifier: &rbacv3.Principal_NotId{NotId: claimValuesID(path, nots)}})
	}
	return and
}

func claimValuesID(path []string, vals []string) *rbacv3.Principal {
	var one *matcherv3.ValueMatcher
	if len(vals) == 1 {
		one = &matcherv3.ValueMatcher{MatchPattern: &matcherv3.ValueMatcher_StringMatch{StringMatch: stringMatch(vals[0], "")}}
	} else {
		or := make([]*matcherv3.ValueMatcher, len(vals))
		for i, v := range vals {
			or[i] = &matcherv3.ValueMatcher{MatchPattern: &matcherv3.ValueMatcher_StringMatch{StringMatch: stringMatch(v, "")}}
		}
		one = &matcherv3.ValueMatcher{MatchPattern: &matcherv3.ValueMatcher_OrMatch{OrMatch: &matcherv3.OrMatcher{ValueMatchers: or}}}
	}
	list := &matcherv3.ValueMatcher{MatchPattern: &matcherv3.ValueMatcher_ListMatch{ListMatch: &matcherv3.ListMatcher{
		MatchPattern: &matcherv3.ListMatcher_OneOf{OneOf: one},
	}}}
	//lint:ignore SA1019 what istiod sets (principal.go); parity
	return &rbacv3.Principal{Identifier: &rbacv3.Principal_Metadata{Metadata: &matcherv3.MetadataMatcher{
		Filter: JWTFilterName,
		Path:   metadataPath(append([]string{jwtPayloadKey}, path...)...),
		Value: &matcherv3.ValueMatcher{MatchPattern: &matcherv3.ValueMatcher_OrMatch{OrMatch: &matcherv3.OrMatcher{
			ValueMatchers: []*matcherv3.ValueMatcher{list, one},
		}}},
	}}}
}

func metadataPath(keys ...string) []*matcherv3.MetadataMatcher_PathSegment {
	out := make([]*matcherv3.MetadataMatcher_PathSegment, len(keys))
	for i, k := range keys {
		out[i] = &matcherv3.MetadataMatcher_PathSegment{Segment: &matcherv3.MetadataMatcher_PathSegment_Key{Key: k}}
	}
	return out
}

// claimPath is the payload path of a request.auth key: "aud" for
// audiences, "azp" for presenter, the bracketed names of
// request.auth.claims[a][b] (nested claims); nil for a malformed key.
func claimPath(key string) []string {
	switch key {
	case "request.auth.audiences":
		return []string{"aud"}
	case "request.auth.presenter":
		return []string{"azp"}
	}
	s := strings.TrimPrefix(key, "request.auth.claims")
	var out []string
	for rest := s; rest != ""; {
		if rest[0] != '[' {
			out = nil
			break
		}
		end := strings.IndexAny(rest[1:], "[]")
		if end < 0 || rest[1+end] != ']' {
			out = nil
			break
		}
		out = append(out, rest[1:1+end])
		rest = rest[2+end:]
	}
	if out != nil {
		return out
	}
	// Not a list of [name]s: the whole bracketed text is one name.
	if len(s) >= 2 && s[0] == '[' && s[len(s)-1] == ']' {
		return []string{s[1 : len(s)-1]}
	}
	return nil
}
