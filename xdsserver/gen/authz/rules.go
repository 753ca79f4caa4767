package authz

import (
	"net/netip"
	"regexp"
	"strconv"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	security "istio.io/api/security/v1beta1"

	"github.com/baremesh/baremesh/xdsserver/gen"
)

// builder translates one rule for one port kind and action.
type builder struct {
	tcp   bool   // the port is TCP: HTTP-only fields cannot apply
	allow bool   // an ALLOW rule: one that cannot apply is dropped
	td    string // trust domain, for serviceAccounts
}

// rule is Istio's translation of a rule, in istiod's shape: one
// permission per "to" (Envoy ORs them), the AND of its operation's
// fields and the destination conditions; one principal per "from", the
// AND of its source's fields and the source conditions. ok is false
// when the rule must be dropped (an ALLOW rule with a part that cannot
// apply); a DENY rule loses such parts instead, matching more.
func (b builder) rule(r *security.Rule) (*rbacv3.Policy, bool) {
	var permConds []*rbacv3.Permission
	var idConds []*rbacv3.Principal
	for _, c := range r.GetWhen() {
		p, id, ok := b.condition(c)
		if !ok {
			if b.allow {
				return nil, false
			}
			continue
		}
		permConds = append(permConds, p...)
		idConds = append(idConds, id...)
	}
	var perms []*rbacv3.Permission
	for _, to := range r.GetTo() {
		and, ok := b.operation(to.GetOperation())
		if !ok {
			return nil, false
		}
		perms = append(perms, andPermOrAny(append(and, permConds...)))
	}
	if len(r.GetTo()) == 0 {
		perms = []*rbacv3.Permission{andPermOrAny(permConds)}
	}
	var ids []*rbacv3.Principal
	for _, from := range r.GetFrom() {
		and, ok := b.source(from.GetSource())
		if !ok {
			return nil, false
		}
		ids = append(ids, andIDOrAny(append(and, idConds...)))
	}
	if len(r.GetFrom()) == 0 {
		ids = []*rbacv3.Principal{andIDOrAny(idConds)}
	}
	return &rbacv3.Policy{Permissions: perms, Principals: ids}, true
}

func andPermOrAny(and []*rbacv3.Permission) *rbacv3.Permission {
	if len(and) == 0 {
		return anyPerm()
	}
	return andPerm(and)
}

func andIDOrAny(and []*rbacv3.Principal) *rbacv3.Principal {
	if len(and) == 0 {
		return anyID()
	}
	return andID(and)
}

// operation is the list of an operation's fields, to be AND-ed.
// HTTP-only fields on a TCP port: an ALLOW rule is dropped (ok false), a
// DENY rule ignores them.
func (b builder) operation(op *security.Operation) ([]*rbacv3.Permission, bool) {
	var and []*rbacv3.Permission
	add := func(vals, nots []string, one func(string) *rbacv3.Permission, httpOnly bool) bool {
		if len(vals)+len(nots) == 0 {
			return true
		}
		if httpOnly && b.tcp {
			return !b.allow
		}
		if len(vals) > 0 {
			and = append(and, orPerm(mapPerm(vals, one)))
		}
		if len(nots) > 0 {
			and = append(and, &rbacv3.Permission{Rule: &rbacv3.Permission_NotRule{NotRule: orPerm(mapPerm(nots, one))}})
		}
		return true
	}
	if !add(op.GetHosts(), op.GetNotHosts(), hostPerm, true) ||
		!add(op.GetPorts(), op.GetNotPorts(), portPerm, false) ||
		!add(op.GetMethods(), op.GetNotMethods(), methodPerm, true) ||
		!add(op.GetPaths(), op.GetNotPaths(), pathPerm, true) {
		return nil, false
	}
	return and, true
}

// source is the list of a source's fields, to be AND-ed.
// requestPrincipals (JWT) are HTTP-only: on a TCP port an ALLOW rule is
// dropped (ok false), a DENY rule leaves them out (it denies more).
func (b builder) source(s *security.Source) ([]*rbacv3.Principal, bool) {
	var and []*rbacv3.Principal
	add := func(vals, nots []string, one func(string) *rbacv3.Principal) {
		if len(vals) > 0 {
			and = append(and, orID(mapID(vals, one)))
		}
		if len(nots) > 0 {
			and = append(and, &rbacv3.Principal{Identifier: &rbacv3.Principal_NotId{NotId: orID(mapID(nots, one))}})
		}
	}
	add(s.GetPrincipals(), s.GetNotPrincipals(), principalID)
	if len(s.GetRequestPrincipals())+len(s.GetNotRequestPrincipals()) > 0 {
		if b.tcp {
			if b.allow {
				return nil, false
			}
		} else {
			add(s.GetRequestPrincipals(), s.GetNotRequestPrincipals(), requestPrincipalID)
		}
	}
	add(s.GetNamespaces(), s.GetNotNamespaces(), namespaceID)
	add(s.GetServiceAccounts(), s.GetNotServiceAccounts(), b.serviceAccountID)
	add(s.GetTrustDomains(), s.GetNotTrustDomains(), trustDomainID)
	add(s.GetIpBlocks(), s.GetNotIpBlocks(), directIPID)
	add(s.GetRemoteIpBlocks(), s.GetNotRemoteIpBlocks(), remoteIPID)
	return and, true
}

// condition translates a when condition into a permission (destination
// keys) or a principal (source keys); ok false when it cannot apply
// here (HTTP keys on a TCP port, JWT and experimental keys).
func (b builder) condition(c *security.Condition) ([]*rbacv3.Permission, []*rbacv3.Principal, bool) {
	key := c.GetKey()
	idOf := func(one func(string) *rbacv3.Principal) []*rbacv3.Principal {
		var and []*rbacv3.Principal
		if len(c.GetValues()) > 0 {
			and = append(and, orID(mapID(c.GetValues(), one)))
		}
		if len(c.GetNotValues()) > 0 {
			and = append(and, &rbacv3.Principal{Identifier: &rbacv3.Principal_NotId{NotId: orID(mapID(c.GetNotValues(), one))}})
		}
		return and
	}
	permOf := func(one func(string) *rbacv3.Permission) []*rbacv3.Permission {
		var and []*rbacv3.Permission
		if len(c.GetValues()) > 0 {
			and = append(and, orPerm(mapPerm(c.GetValues(), one)))
		}
		if len(c.GetNotValues()) > 0 {
			and = append(and, &rbacv3.Permission{Rule: &rbacv3.Permission_NotRule{NotRule: orPerm(mapPerm(c.GetNotValues(), one))}})
		}
		return and
	}
	switch {
	case key == "source.ip":
		return nil, idOf(directIPID), true
	case key == "remote.ip":
		return nil, idOf(remoteIPID), true
	case key == "source.namespace":
		return nil, idOf(namespaceID), true
	case key == "source.principal":
		return nil, idOf(principalID), true
	case key == "source.serviceAccount":
		return nil, idOf(b.serviceAccountID), true
	case key == "destination.ip":
		return permOf(destIPPerm), nil, true
	case key == "destination.port":
		return permOf(portPerm), nil, true
	case key == "connection.sni":
		return permOf(sniPerm), nil, true
	case key == "request.auth.principal":
		if b.tcp {
			return nil, nil, false
		}
		return nil, idOf(requestPrincipalID), true
	case key == "request.auth.audiences", key == "request.auth.presenter", strings.HasPrefix(key, "request.auth.claims["):
		if b.tcp {
			return nil, nil, false
		}
		path := claimPath(key)
		if path == nil {
			return nil, nil, false
		}
		return nil, claimsID(path, c.GetValues(), c.GetNotValues()), true
	case strings.HasPrefix(key, "request.headers[") && strings.HasSuffix(key, "]"):
		if b.tcp {
			return nil, nil, false
		}
		name := key[len("request.headers[") : len(key)-1]
		return nil, idOf(func(v string) *rbacv3.Principal {
			return &rbacv3.Principal{Identifier: &rbacv3.Principal_Header{Header: headerMatch(name, v, false)}}
		}), true
	}
	return nil, nil, false
}

// Principals: Istio's principal strings leave out "spiffe://"; "*"
// alone is any authenticated peer, a leading or trailing '*' a suffix
// or prefix.
func principalID(v string) *rbacv3.Principal {
	return authenticated(stringMatch(v, "spiffe://"))
}

func namespaceID(v string) *rbacv3.Principal {
	return authenticated(regexMatch(`.*/ns/` + globRegex(v, `[^/]*`) + `/.*`))
}

func (b builder) serviceAccountID(v string) *rbacv3.Principal {
	ns, name, _ := strings.Cut(v, "/")
	return authenticated(&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "spiffe://" + b.td + "/ns/" + ns + "/sa/" + name}})
}

func trustDomainID(v string) *rbacv3.Principal {
	if v == "*" {
		return authenticated(regexMatch(`spiffe://.+`))
	}
	return authenticated(regexMatch(`spiffe://` + globRegex(v, `[^/]*`) + `/.*`))
}

// authenticated allocates the principal and its two wrappers as one
// block (a policy set has one or more per rule).
func authenticated(m *matcherv3.StringMatcher) *rbacv3.Principal {
	b := &struct {
		p rbacv3.Principal
		w rbacv3.Principal_Authenticated_
		a rbacv3.Principal_Authenticated
	}{}
	b.a.PrincipalName = m
	b.w.Authenticated = &b.a
	b.p.Identifier = &b.w
	return &b.p
}

func directIPID(v string) *rbacv3.Principal {
	return &rbacv3.Principal{Identifier: &rbacv3.Principal_DirectRemoteIp{DirectRemoteIp: cidr(v)}}
}

func remoteIPID(v string) *rbacv3.Principal {
	return &rbacv3.Principal{Identifier: &rbacv3.Principal_RemoteIp{RemoteIp: cidr(v)}}
}

func hostPerm(v string) *rbacv3.Permission {
	return &rbacv3.Permission{Rule: &rbacv3.Permission_Header{Header: headerMatch(":authority", v, true)}}
}

func methodPerm(v string) *rbacv3.Permission {
	b := &struct {
		p rbacv3.Permission
		w rbacv3.Permission_Header
	}{}
	b.w.Header = headerMatch(":method", v, false)
	b.p.Rule = &b.w
	return &b.p
}

func portPerm(v string) *rbacv3.Permission {
	n, _ := strconv.ParseUint(v, 10, 32) // validated
	return &rbacv3.Permission{Rule: &rbacv3.Permission_DestinationPort{DestinationPort: uint32(n)}}
}

func destIPPerm(v string) *rbacv3.Permission {
	return &rbacv3.Permission{Rule: &rbacv3.Permission_DestinationIp{DestinationIp: cidr(v)}}
}

func sniPerm(v string) *rbacv3.Permission {
	return &rbacv3.Permission{Rule: &rbacv3.Permission_RequestedServerName{RequestedServerName: stringMatch(v, "")}}
}

// pathPerm matches the path without its query: exact, "*" (any), a
// prefix ("/api/*"), a suffix ("*.html"), or Istio's templates ("{*}"
// one segment, "{**}" any number).
func pathPerm(v string) *rbacv3.Permission {
	var m *matcherv3.StringMatcher
	if strings.Contains(v, "{*") {
		var re strings.Builder
		for i, seg := range strings.Split(v, "/") {
			if i > 0 {
				re.WriteByte('/')
			}
			switch seg {
			case "{*}":
				re.WriteString(`[^/]+`)
			case "{**}":
				re.WriteString(`.+`)
			default:
				re.WriteString(regexp.QuoteMeta(seg))
			}
		}
		m = regexMatch(re.String())
	} else {
		m = stringMatch(v, "")
	}
	return &rbacv3.Permission{Rule: &rbacv3.Permission_UrlPath{UrlPath: &matcherv3.PathMatcher{Rule: &matcherv3.PathMatcher_Path{Path: m}}}}
}

func headerMatch(name, v string, ignoreCase bool) *routev3.HeaderMatcher {
	m := stringMatch(v, "")
	m.IgnoreCase = ignoreCase && m.GetSafeRegex() == nil
	b := &struct {
		h routev3.HeaderMatcher
		w routev3.HeaderMatcher_StringMatch
	}{}
	b.w.StringMatch = m
	b.h.Name, b.h.HeaderMatchSpecifier = name, &b.w
	return &b.h
}

// stringMatch is Istio's string matching with an implied prefix: "*"
// any non-empty value, "x*" a prefix, "*x" a suffix, else exact.
func stringMatch(v, prefix string) *matcherv3.StringMatcher {
	switch {
	case v == "*":
		return regexMatch(`.+`)
	case strings.HasSuffix(v, "*"):
		return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: prefix + v[:len(v)-1]}}
	case strings.HasPrefix(v, "*"):
		return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Suffix{Suffix: v[1:]}}
	}
	b := &struct {
		m matcherv3.StringMatcher
		w matcherv3.StringMatcher_Exact
	}{}
	b.w.Exact = prefix + v
	b.m.MatchPattern = &b.w
	return &b.m
}

func regexMatch(re string) *matcherv3.StringMatcher {
	b := &struct {
		m matcherv3.StringMatcher
		w matcherv3.StringMatcher_SafeRegex
		r matcherv3.RegexMatcher
	}{}
	b.r.Regex = re
	b.w.SafeRegex = &b.r
	b.m.MatchPattern = &b.w
	return &b.m
}

// globRegex quotes v for a regex, a leading or trailing '*' standing for
// any (star).
func globRegex(v, star string) string {
	switch {
	case v == "*":
		return star
	case strings.HasSuffix(v, "*"):
		return regexp.QuoteMeta(v[:len(v)-1]) + star
	case strings.HasPrefix(v, "*"):
		return star + regexp.QuoteMeta(v[1:])
	}
	return regexp.QuoteMeta(v)
}

func cidr(v string) *corev3.CidrRange {
	if p, err := netip.ParsePrefix(v); err == nil {
		return &corev3.CidrRange{AddressPrefix: p.Addr().String(), PrefixLen: gen.U32(uint32(p.Bits()))}
	}
	a, _ := netip.ParseAddr(v) // validated
	return &corev3.CidrRange{AddressPrefix: a.String(), PrefixLen: gen.U32(uint32(a.BitLen()))}
}

// The "any" permission and principal, shared (never altered).
var (
	sharedAnyPerm = &rbacv3.Permission{Rule: &rbacv3.Permission_Any{Any: true}}
	sharedAnyID   = &rbacv3.Principal{Identifier: &rbacv3.Principal_Any{Any: true}}
)

func anyPerm() *rbacv3.Permission { return sharedAnyPerm }

func anyID() *rbacv3.Principal { return sharedAnyID }

func orPerm(ps []*rbacv3.Permission) *rbacv3.Permission {
	if len(ps) == 1 {
		return ps[0]
	}
	return &rbacv3.Permission{Rule: &rbacv3.Permission_OrRules{OrRules: &rbacv3.Permission_Set{Rules: ps}}}
}

func andPerm(ps []*rbacv3.Permission) *rbacv3.Permission {
	if len(ps) == 1 {
		return ps[0]
	}
	return &rbacv3.Permission{Rule: &rbacv3.Permission_AndRules{AndRules: &rbacv3.Permission_Set{Rules: ps}}}
}

func orID(ps []*rbacv3.Principal) *rbacv3.Principal {
	if len(ps) == 1 {
		return ps[0]
	}
	return &rbacv3.Principal{Identifier: &rbacv3.Principal_OrIds{OrIds: &rbacv3.Principal_Set{Ids: ps}}}
}

func andID(ps []*rbacv3.Principal) *rbacv3.Principal {
	if len(ps) == 1 {
		return ps[0]
	}
	return &rbacv3.Principal{Identifier: &rbacv3.Principal_AndIds{AndIds: &rbacv3.Principal_Set{Ids: ps}}}
}

func mapPerm(vs []string, f func(string) *rbacv3.Permission) []*rbacv3.Permission {
	out := make([]*rbacv3.Permission, len(vs))
	for i, v := range vs {
		out[i] = f(v)
	}
	return out
}

func mapID(vs []string, f func(string) *rbacv3.Principal) []*rbacv3.Principal {
	out := make([]*rbacv3.Principal, len(vs))
	for i, v := range vs {
		out[i] = f(v)
	}
	return out
}
