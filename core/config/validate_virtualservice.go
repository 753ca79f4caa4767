package config

// VirtualService validation, after istio/istio
// pkg/config/validation/virtualservice.go and validation.go.

import (
	"strings"

	networking "istio.io/api/networking/v1alpha3"
)

func validateVirtualService(c *Config) Errors {
	var errs Errors
	vs := c.Spec.(*networking.VirtualService)

	// A VirtualService without hosts is a delegate, included by another.
	delegate := len(vs.GetHosts()) == 0
	if delegate {
		if len(vs.GetGateways()) > 0 {
			errs.Add("spec.gateways", "a delegate VirtualService (one without hosts) must not name gateways")
		}
		if len(vs.GetTls()) > 0 {
			errs.Add("spec.tls", "a delegate VirtualService (one without hosts) must not have tls routes")
		}
		if len(vs.GetTcp()) > 0 {
			errs.Add("spec.tcp", "a delegate VirtualService (one without hosts) must not have tcp routes")
		}
	}
	checkGatewayNames(&errs, "spec.gateways", vs.GetGateways())
	appliesToMesh := len(vs.GetGateways()) == 0
	appliesToGateway := false
	for _, g := range vs.GetGateways() {
		if g == "mesh" {
			appliesToMesh = true
		} else {
			appliesToGateway = true
		}
	}

	hostsOK := true
	for i, h := range vs.GetHosts() {
		f := idx("spec.hosts", i)
		if e := wildcardDomainError(h); e != "" {
			if !isIP(h) {
				errs.Add(f, "%s", e)
				hostsOK = false
			}
		} else if h == "*" && appliesToMesh {
			errs.Add(f, "host \"*\" is not allowed for a VirtualService bound to the mesh")
			hostsOK = false
		}
	}
	if hostsOK {
		hs := vs.GetHosts()
		for i := range hs {
			for j := i + 1; j < len(hs); j++ {
				if hostsOverlap(hs[i], hs[j]) {
					errs.Add(idx("spec.hosts", j), "host %q duplicates or overlaps host %q", hs[j], hs[i])
				}
			}
		}
	}

	if len(vs.GetHttp()) == 0 && len(vs.GetTcp()) == 0 && len(vs.GetTls()) == 0 {
		errs.Add("spec", "at least one of http, tcp or tls routes is required")
	}
	for i, r := range vs.GetHttp() {
		f := idx("spec.http", i)
		if r == nil {
			errs.Add(f, "route must not be null")
			continue
		}
		if r.GetDelegate() != nil && !appliesToGateway {
			errs.Add(f+".delegate", "delegation is only supported on gateways")
		}
		checkHTTPRoute(&errs, f, r, delegate)
	}
	for i, r := range vs.GetTls() {
		checkTLSRoute(&errs, idx("spec.tls", i), r, vs.GetHosts())
	}
	for i, r := range vs.GetTcp() {
		checkTCPRoute(&errs, idx("spec.tcp", i), r)
	}
	checkExportTo(&errs, "spec.exportTo", c.Namespace, vs.GetExportTo(), false)
	return errs
}

// hostsOverlap reports whether a and b match a common name: equal, or one
// a wildcard covering the other.
func hostsOverlap(a, b string) bool {
	a, b = strings.ToLower(a), strings.ToLower(b)
	if a == b {
		return true
	}
	covers := func(w, h string) bool {
		if w == "*" {
			return true
		}
		return strings.HasPrefix(w, "*.") && strings.HasSuffix(h, w[1:])
	}
	return covers(a, b) || covers(b, a)
}

// checkGatewayNames: "mesh", "name", "namespace/name" or the legacy
// "name.namespace…" form.
func checkGatewayNames(errs *Errors, field string, names []string) {
	for i, g := range names {
		f := idx(field, i)
		ns, name, ok := strings.Cut(g, "/")
		if !ok {
			checkFQDN(errs, f, g)
			continue
		}
		if ns == "" || name == "" {
			errs.Add(f, "gateway %q: namespace and name must not be empty", g)
			continue
		}
		if !isDNSLabel(ns) {
			errs.Add(f, "gateway %q: invalid namespace %q", g, ns)
		}
		if !isDNSLabel(name) {
			errs.Add(f, "gateway %q: invalid gateway name %q", g, name)
		}
	}
}

func checkHTTPRoute(errs *Errors, f string, r *networking.HTTPRoute, delegate bool) {
	hasRoute := len(r.GetRoute()) > 0
	if r.GetRedirect() != nil {
		if hasRoute {
			errs.Add(f+".redirect", "a route cannot have both route and redirect")
		}
		if r.GetFault() != nil {
			errs.Add(f+".redirect", "a route cannot have both fault and redirect")
		}
		if r.GetRewrite() != nil {
			errs.Add(f+".redirect", "a route cannot have both rewrite and redirect")
		}
	}
	if r.GetDirectResponse() != nil {
		if hasRoute || r.GetRedirect() != nil || r.GetFault() != nil || r.GetRewrite() != nil ||
			r.GetMirror() != nil || len(r.GetMirrors()) > 0 {
			errs.Add(f+".directResponse", "directResponse excludes route, redirect, fault, rewrite and mirror")
		}
	}
	if r.GetDelegate() != nil {
		if delegate {
			errs.Add(f+".delegate", "a delegate VirtualService cannot delegate again")
		}
		if hasRoute || r.GetRedirect() != nil {
			errs.Add(f+".delegate", "delegate excludes route and redirect")
		}
		if r.GetDelegate().GetName() == "" {
			errs.Add(f+".delegate.name", "name is required")
		}
		if ns := r.GetDelegate().GetNamespace(); ns != "" && !isNamespace(ns) {
			errs.Add(f+".delegate.namespace", "%q is not a namespace name", ns)
		}
	}
	if r.GetRedirect() == nil && r.GetDelegate() == nil && r.GetDirectResponse() == nil && !hasRoute {
		errs.Add(f+".route", "one of route, redirect, directResponse or delegate is required")
	}

	for i, m := range r.GetMatch() {
		checkHTTPMatch(errs, idx(f+".match", i), m)
	}
	checkHeaderOps(errs, f+".headers", r.GetHeaders())
	checkCORS(errs, f+".corsPolicy", r.GetCorsPolicy())
	checkFault(errs, f+".fault", r.GetFault())
	//lint:ignore SA1019 the deprecated field is still validated, as istiod does
	if mp := r.GetMirrorPercent(); mp != nil && mp.GetValue() > 100 {
		errs.Add(f+".mirrorPercent", "%d is more than 100", mp.GetValue())
	}
	if r.GetMirror() != nil {
		checkDestinationRequired(errs, f+".mirror", r.GetMirror())
	}
	checkPercentage(errs, f+".mirrorPercentage", r.GetMirrorPercentage())
	for i, m := range r.GetMirrors() {
		mf := idx(f+".mirrors", i)
		if m.GetDestination() == nil {
			errs.Add(mf+".destination", "destination is required")
		} else {
			checkDestinationRequired(errs, mf+".destination", m.GetDestination())
		}
		checkPercentage(errs, mf+".percentage", m.GetPercentage())
	}
	checkRedirect(errs, f+".redirect", r.GetRedirect())
	if dr := r.GetDirectResponse(); dr != nil && (dr.GetStatus() < 200 || dr.GetStatus() > 599) {
		errs.Add(f+".directResponse.status", "HTTP status %d is not in the range 200..599", dr.GetStatus())
	}
	checkRetries(errs, f+".retries", r.GetRetries())
	checkRewrite(errs, f+".rewrite", r.GetRewrite())
	checkDuration(errs, f+".timeout", r.GetTimeout())

	var total int64
	for i, d := range r.GetRoute() {
		df := idx(f+".route", i)
		if d == nil {
			errs.Add(df, "destination must not be null")
			continue
		}
		checkDestinationRequired(errs, df+".destination", d.GetDestination())
		checkHeaderOps(errs, df+".headers", d.GetHeaders())
		if d.GetWeight() < 0 {
			errs.Add(df+".weight", "weight %d must not be negative", d.GetWeight())
		}
		total += int64(d.GetWeight())
	}
	checkWeightSum(errs, f+".route", len(r.GetRoute()), total)
}

// checkWeightSum applies the rule baremesh keeps from Istio's v1 API
// documentation: several destinations' weights must add up to 100 (a
// single destination takes all traffic whatever its weight). Newer Istio
// treats weights as relative; a split that does not add up to 100 is far
// more often a typo than an intent, so baremesh refuses it.
func checkWeightSum(errs *Errors, f string, n int, total int64) {
	if n > 1 && total != 100 {
		errs.Add(f, "the weights of the destinations add up to %d, not 100", total)
	}
}

func checkHTTPMatch(errs *Errors, f string, m *networking.HTTPMatchRequest) {
	if m == nil {
		errs.Add(f, "match must not be null")
		return
	}
	// An empty uri prefix matches every path, as in Envoy.
	checkStringMatch(errs, f+".uri", m.GetUri(), true, false)
	checkStringMatch(errs, f+".scheme", m.GetScheme(), false, false)
	checkStringMatch(errs, f+".method", m.GetMethod(), false, false)
	if m.GetMethod() != nil {
		if ex := m.GetMethod().GetExact(); ex != "" && !httpTokenRE.MatchString(ex) {
			errs.Add(f+".method.exact", "%q is not an HTTP method", ex)
		}
	}
	checkStringMatch(errs, f+".authority", m.GetAuthority(), false, false)
	// An empty header match ({}) tests that the header is present.
	for name, sm := range m.GetHeaders() {
		checkMatchHeaderName(errs, mapKey(f+".headers", name), name)
		checkStringMatch(errs, mapKey(f+".headers", name), sm, false, true)
	}
	for name, sm := range m.GetWithoutHeaders() {
		checkMatchHeaderName(errs, mapKey(f+".withoutHeaders", name), name)
		checkStringMatch(errs, mapKey(f+".withoutHeaders", name), sm, false, true)
	}
	for name, sm := range m.GetQueryParams() {
		checkStringMatch(errs, mapKey(f+".queryParams", name), sm, false, true)
	}
	if m.GetPort() != 0 {
		checkPort(errs, f+".port", m.GetPort())
	}
	checkLabels(errs, f+".sourceLabels", m.GetSourceLabels())
	checkGatewayNames(errs, f+".gateways", m.GetGateways())
	if ns := m.GetSourceNamespace(); ns != "" && !isNamespace(ns) {
		errs.Add(f+".sourceNamespace", "%q is not a namespace name", ns)
	}
}

// checkMatchHeaderName also accepts JWT claims ("@request.auth.claims.x").
func checkMatchHeaderName(errs *Errors, f, name string) {
	if strings.HasPrefix(name, "@request.auth.claims.") && len(name) > len("@request.auth.claims.") {
		return
	}
	checkHeaderName(errs, f, name)
}

// checkDestinationRequired checks a destination that must be present.
func checkDestinationRequired(errs *Errors, f string, d *networking.Destination) {
	if d == nil {
		errs.Add(f, "destination is required")
		return
	}
	checkDestination(errs, f, d)
}

func checkDestination(errs *Errors, f string, d *networking.Destination) {
	switch h := d.GetHost(); {
	case h == "":
		errs.Add(f+".host", "host is required")
	case h == "*":
		errs.Add(f+".host", "host \"*\" is not a destination")
	default:
		checkWildcardHost(errs, f+".host", h)
	}
	if s := d.GetSubset(); s != "" && !isDNSLabel(s) {
		errs.Add(f+".subset", "subset name %q is not a DNS-1123 label", s)
	}
	if p := d.GetPort(); p != nil && p.GetNumber() != 0 {
		checkPort(errs, f+".port.number", p.GetNumber())
	}
}

func checkRouteDestinations(errs *Errors, f string, ds []*networking.RouteDestination) {
	var total int64
	for i, d := range ds {
		df := idx(f, i)
		if d == nil {
			errs.Add(df, "destination must not be null")
			continue
		}
		checkDestinationRequired(errs, df+".destination", d.GetDestination())
		if d.GetWeight() < 0 {
			errs.Add(df+".weight", "weight %d must not be negative", d.GetWeight())
		}
		total += int64(d.GetWeight())
	}
	checkWeightSum(errs, f, len(ds), total)
}

func checkTLSRoute(errs *Errors, f string, r *networking.TLSRoute, vsHosts []string) {
	if r == nil {
		errs.Add(f, "route must not be null")
		return
	}
	if len(r.GetMatch()) == 0 {
		errs.Add(f+".match", "a tls route needs at least one match")
	}
	for i, m := range r.GetMatch() {
		mf := idx(f+".match", i)
		if m == nil {
			errs.Add(mf, "match must not be null")
			continue
		}
		if len(m.GetSniHosts()) == 0 {
			errs.Add(mf+".sniHosts", "at least one SNI host is required")
		}
		for j, sni := range m.GetSniHosts() {
			sf := idx(mf+".sniHosts", j)
			if e := wildcardDomainError(sni); e != "" {
				errs.Add(sf, "%s", e)
				continue
			}
			if !sniCovered(sni, vsHosts) {
				errs.Add(sf, "SNI host %q is not covered by any of the VirtualService hosts", sni)
			}
		}
		for j, s := range m.GetDestinationSubnets() {
			checkIPOrCIDR(errs, idx(mf+".destinationSubnets", j), s)
		}
		if m.GetPort() != 0 {
			checkPort(errs, mf+".port", m.GetPort())
		}
		checkLabels(errs, mf+".sourceLabels", m.GetSourceLabels())
		checkGatewayNames(errs, mf+".gateways", m.GetGateways())
	}
	if len(r.GetRoute()) == 0 {
		errs.Add(f+".route", "a tls route needs at least one destination")
	}
	checkRouteDestinations(errs, f+".route", r.GetRoute())
}

// sniCovered reports whether sni equals or falls under one of hosts.
func sniCovered(sni string, hosts []string) bool {
	sni = strings.ToLower(sni)
	for _, h := range hosts {
		h = strings.ToLower(h)
		switch {
		case h == sni || h == "*":
			return true
		case strings.HasPrefix(h, "*.") && strings.HasSuffix(sni, h[1:]):
			return true
		}
	}
	return false
}

func checkTCPRoute(errs *Errors, f string, r *networking.TCPRoute) {
	if r == nil {
		errs.Add(f, "route must not be null")
		return
	}
	for i, m := range r.GetMatch() {
		mf := idx(f+".match", i)
		if m == nil {
			errs.Add(mf, "match must not be null")
			continue
		}
		for j, s := range m.GetDestinationSubnets() {
			checkIPOrCIDR(errs, idx(mf+".destinationSubnets", j), s)
		}
		if m.GetPort() != 0 {
			checkPort(errs, mf+".port", m.GetPort())
		}
		if s := m.GetSourceSubnet(); s != "" {
			checkIPOrCIDR(errs, mf+".sourceSubnet", s)
		}
		checkLabels(errs, mf+".sourceLabels", m.GetSourceLabels())
		checkGatewayNames(errs, mf+".gateways", m.GetGateways())
	}
	if len(r.GetRoute()) == 0 {
		errs.Add(f+".route", "a tcp route needs at least one destination")
	}
	checkRouteDestinations(errs, f+".route", r.GetRoute())
}
