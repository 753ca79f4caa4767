package config

import (
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/baremesh/baremesh/core/config/gwapi"
)

// Validation of the Gateway API kinds: the rules of the API's CRD schemas
// and CEL validations that a Kubernetes API server would enforce, so a
// file or MCP resource is refused as kubectl would refuse it.

// decodeInto decodes c's spec into out, recording a decode failure.
func decodeInto(errs *Errors, c *Config, out any) bool {
	if err := DecodeSpec(c, out); err != nil {
		msg := err.Error()
		if i := strings.Index(msg, ": "); i >= 0 {
			msg = msg[i+2:]
		}
		errs.Add("spec", "%s", strings.TrimPrefix(msg, "json: "))
		return false
	}
	return true
}

func validateGatewayClass(c *Config) Errors {
	var errs Errors
	var s gwapi.GatewayClassSpec
	if decodeInto(&errs, c, &s) && s.ControllerName == "" {
		errs.Add("spec.controllerName", "required")
	}
	return errs
}

var listenerProtocols = map[string]bool{"HTTP": true, "HTTPS": true, "TLS": true, "TCP": true, "UDP": true}

func validateKubernetesGateway(c *Config) Errors {
	var errs Errors
	var s gwapi.GatewaySpec
	if !decodeInto(&errs, c, &s) {
		return errs
	}
	if s.GatewayClassName == "" {
		errs.Add("spec.gatewayClassName", "required")
	}
	if len(s.Listeners) == 0 {
		errs.Add("spec.listeners", "at least one listener is required")
	}
	checkListeners(&errs, "spec.listeners", s.Listeners, false)
	for i, a := range s.Addresses {
		f := idx("spec.addresses", i)
		switch t := gwapi.Deref(a.Type, "IPAddress"); t {
		case "IPAddress":
			if a.Value != "" && !isIP(a.Value) {
				errs.Add(f+".value", "%q is not an IP address", a.Value)
			}
		case "Hostname":
			checkWildcardHost(&errs, f+".value", a.Value)
		}
	}
	return errs
}

// checkListeners checks a Gateway's listeners, or a ListenerSet's
// (entry: the port may be unset for HTTP and HTTPS).
func checkListeners(errs *Errors, field string, listeners []gwapi.Listener, entry bool) {
	names := map[string]bool{}
	for i, l := range listeners {
		f := idx(field, i)
		if l.Name == "" || !isDNSLabel(l.Name) {
			errs.Add(f+".name", "%q is not a DNS-1123 label", l.Name)
		} else if names[l.Name] {
			errs.Add(f+".name", "duplicate listener name %q", l.Name)
		}
		names[l.Name] = true
		defaultPort := entry && l.Port == 0 && (l.Protocol == "HTTP" || l.Protocol == "HTTPS")
		if !defaultPort && (l.Port < 1 || l.Port > 65535) {
			errs.Add(f+".port", "%d is not a port number (1-65535)", l.Port)
		}
		if !listenerProtocols[l.Protocol] && !strings.Contains(l.Protocol, "/") {
			errs.Add(f+".protocol", "unknown protocol %q (HTTP, HTTPS, TLS, TCP, UDP or a domain-prefixed name)", l.Protocol)
		}
		if l.Hostname != nil {
			if l.Protocol == "TCP" || l.Protocol == "UDP" {
				errs.Add(f+".hostname", "must not be set for protocol %s", l.Protocol)
			} else {
				checkWildcardHost(errs, f+".hostname", *l.Hostname)
			}
		}
		switch {
		case l.Protocol == "HTTPS" && l.TLS == nil:
			errs.Add(f+".tls", "required for protocol HTTPS")
		case (l.Protocol == "HTTP" || l.Protocol == "TCP" || l.Protocol == "UDP") && l.TLS != nil:
			errs.Add(f+".tls", "must not be set for protocol %s", l.Protocol)
		}
		if l.TLS != nil {
			mode := gwapi.Deref(l.TLS.Mode, "Terminate")
			switch mode {
			case "Terminate":
				if len(l.TLS.CertificateRefs) == 0 && len(l.TLS.Options) == 0 {
					errs.Add(f+".tls.certificateRefs", "required when mode is Terminate")
				}
			case "Passthrough":
				if l.Protocol == "HTTPS" {
					errs.Add(f+".tls.mode", "Passthrough is not allowed for protocol HTTPS")
				}
			default:
				errs.Add(f+".tls.mode", "unknown mode %q (Terminate or Passthrough)", mode)
			}
		}
		if ar := l.AllowedRoutes; ar != nil && ar.Namespaces != nil && ar.Namespaces.From != nil {
			switch from := *ar.Namespaces.From; from {
			case "All", "Same", "None":
			case "Selector":
				if ar.Namespaces.Selector == nil {
					errs.Add(f+".allowedRoutes.namespaces.selector", "required when from is Selector")
				}
			default:
				errs.Add(f+".allowedRoutes.namespaces.from", "unknown value %q (All, Same, Selector or None)", from)
			}
		}
	}
}

func checkParentRefs(errs *Errors, refs []gwapi.ParentReference) {
	for i, p := range refs {
		f := idx("spec.parentRefs", i)
		if p.Name == "" {
			errs.Add(f+".name", "required")
		}
		if p.Namespace != nil && !isNamespace(*p.Namespace) {
			errs.Add(f+".namespace", "%q is not a namespace name", *p.Namespace)
		}
		if p.Port != nil && (*p.Port < 1 || *p.Port > 65535) {
			errs.Add(f+".port", "%d is not a port number", *p.Port)
		}
	}
}

func checkRouteHostnames(errs *Errors, hosts []string) {
	for i, h := range hosts {
		f := idx("spec.hostnames", i)
		if isIP(h) {
			errs.Add(f, "%q: an IP address is not a hostname", h)
			continue
		}
		checkWildcardHost(errs, f, h)
	}
}

func checkBackendRef(errs *Errors, f string, b gwapi.BackendObjectReference, weight *int32) {
	if b.Name == "" {
		errs.Add(f+".name", "required")
	}
	kind := gwapi.Deref(b.Kind, "Service")
	if gwapi.Deref(b.Group, "") == "" && kind == "Service" && b.Port == nil {
		errs.Add(f+".port", "required when the backend is a Service")
	}
	if b.Port != nil && (*b.Port < 1 || *b.Port > 65535) {
		errs.Add(f+".port", "%d is not a port number", *b.Port)
	}
	if b.Namespace != nil && !isNamespace(*b.Namespace) {
		errs.Add(f+".namespace", "%q is not a namespace name", *b.Namespace)
	}
	if weight != nil && (*weight < 0 || *weight > 1000000) {
		errs.Add(f+".weight", "%d is out of range (0-1000000)", *weight)
	}
}

var httpFilterTypes = map[string]bool{"RequestHeaderModifier": true, "ResponseHeaderModifier": true, "RequestMirror": true,
	"RequestRedirect": true, "URLRewrite": true, "CORS": true, "ExternalAuth": true, "ExtensionRef": true}

func checkHTTPFilters(errs *Errors, f string, filters []gwapi.HTTPRouteFilter, grpc bool) {
	var redirect, rewrite bool
	for i, fl := range filters {
		ff := idx(f, i)
		if !httpFilterTypes[fl.Type] || grpc && (fl.Type == "RequestRedirect" || fl.Type == "URLRewrite" || fl.Type == "CORS" || fl.Type == "ExternalAuth") {
			errs.Add(ff+".type", "unknown filter type %q", fl.Type)
			continue
		}
		set := map[string]bool{"RequestHeaderModifier": fl.RequestHeaderModifier != nil, "ResponseHeaderModifier": fl.ResponseHeaderModifier != nil,
			"RequestMirror": fl.RequestMirror != nil, "RequestRedirect": fl.RequestRedirect != nil, "URLRewrite": fl.URLRewrite != nil,
			"CORS": fl.CORS != nil, "ExternalAuth": fl.ExternalAuth != nil, "ExtensionRef": fl.ExtensionRef != nil}
		for t, ok := range set {
			if ok != (t == fl.Type) {
				if ok {
					errs.Add(ff, "field for %s set on a filter of type %s", t, fl.Type)
				} else {
					errs.Add(ff, "type %s needs its field set", t)
				}
			}
		}
		for _, h := range []*gwapi.HTTPHeaderFilter{fl.RequestHeaderModifier, fl.ResponseHeaderModifier} {
			if h == nil {
				continue
			}
			for _, x := range append(append([]gwapi.HTTPHeader{}, h.Set...), h.Add...) {
				if x.Name == "" {
					errs.Add(ff, "a header name is empty")
				}
			}
		}
		if r := fl.RequestRedirect; r != nil {
			redirect = true
			if r.StatusCode != nil && *r.StatusCode != 301 && *r.StatusCode != 302 && *r.StatusCode != 303 && *r.StatusCode != 307 && *r.StatusCode != 308 {
				errs.Add(ff+".requestRedirect.statusCode", "%d is not one of 301, 302, 303, 307, 308", *r.StatusCode)
			}
			if r.Scheme != nil && *r.Scheme != "http" && *r.Scheme != "https" {
				errs.Add(ff+".requestRedirect.scheme", "%q is not http or https", *r.Scheme)
			}
			checkPathModifier(errs, ff+".requestRedirect.path", r.Path)
		}
		if r := fl.URLRewrite; r != nil {
			rewrite = true
			checkPathModifier(errs, ff+".urlRewrite.path", r.Path)
		}
		if c := fl.CORS; c != nil {
			checkGatewayCORS(errs, ff+".cors", c)
		}
		if m := fl.RequestMirror; m != nil {
			checkBackendRef(errs, ff+".requestMirror.backendRef", m.BackendRef, nil)
			if m.Percent != nil && (*m.Percent < 0 || *m.Percent > 100) {
				errs.Add(ff+".requestMirror.percent", "%d is out of range (0-100)", *m.Percent)
			}
		}
	}
	if redirect && rewrite {
		errs.Add(f, "RequestRedirect and URLRewrite cannot be used together")
	}
}

func checkPathModifier(errs *Errors, f string, p *gwapi.HTTPPathModifier) {
	if p == nil {
		return
	}
	switch p.Type {
	case "ReplaceFullPath":
		if p.ReplaceFullPath == nil || p.ReplacePrefixMatch != nil {
			errs.Add(f, "type ReplaceFullPath needs replaceFullPath (only)")
		}
	case "ReplacePrefixMatch":
		if p.ReplacePrefixMatch == nil || p.ReplaceFullPath != nil {
			errs.Add(f, "type ReplacePrefixMatch needs replacePrefixMatch (only)")
		}
	default:
		errs.Add(f+".type", "unknown type %q (ReplaceFullPath or ReplacePrefixMatch)", p.Type)
	}
}

func checkHeaderMatches(errs *Errors, f string, hs []gwapi.HTTPHeaderMatch) {
	for i, h := range hs {
		if h.Name == "" {
			errs.Add(idx(f, i)+".name", "required")
		}
		if t := gwapi.Deref(h.Type, "Exact"); t != "Exact" && t != "RegularExpression" {
			errs.Add(idx(f, i)+".type", "unknown type %q (Exact or RegularExpression)", t)
		}
	}
}

// checkGatewayDuration checks a Gateway API duration (GEP-2257: Go
// syntax with h, m, s, ms units).
func checkGatewayDuration(errs *Errors, f string, d *string) {
	if d == nil {
		return
	}
	if _, err := time.ParseDuration(*d); err != nil || strings.ContainsAny(*d, "uµn") || strings.HasPrefix(*d, "-") {
		errs.Add(f, "%q is not a Gateway API duration (such as 1h, 30s, 500ms)", *d)
	}
}

func validateHTTPRouteKind(c *Config) Errors { return validateRouteKind(c, false) }

func validateGRPCRoute(c *Config) Errors { return validateRouteKind(c, true) }

// routeRule is what the checks shared by HTTPRoute and GRPCRoute read of
// one rule; matches checks the kind's own matches.
type routeRule struct {
	matches  func(errs *Errors, f string)
	filters  []gwapi.HTTPRouteFilter
	backends []gwapi.HTTPBackendRef
	timeouts *gwapi.HTTPRouteTimeouts
	retry    *gwapi.HTTPRouteRetry
}

// validateRouteKind checks an HTTPRoute (grpc false) or a GRPCRoute: one
// walk over the rules of either, the kind's matches and filter types
// apart.
func validateRouteKind(c *Config, grpc bool) Errors {
	var errs Errors
	var common gwapi.CommonRouteSpec
	var hostnames []string
	var rules []routeRule
	if grpc {
		var s gwapi.GRPCRouteSpec
		if !decodeInto(&errs, c, &s) {
			return errs
		}
		common, hostnames = s.CommonRouteSpec, s.Hostnames
		for _, r := range s.Rules {
			rules = append(rules, routeRule{matches: func(errs *Errors, f string) { checkGRPCMatches(errs, f, r.Matches) },
				filters: r.Filters, backends: r.BackendRefs})
		}
	} else {
		var s gwapi.HTTPRouteSpec
		if !decodeInto(&errs, c, &s) {
			return errs
		}
		common, hostnames = s.CommonRouteSpec, s.Hostnames
		for _, r := range s.Rules {
			rules = append(rules, routeRule{matches: func(errs *Errors, f string) { checkHTTPMatches(errs, f, r.Matches) },
				filters: r.Filters, backends: r.BackendRefs, timeouts: r.Timeouts, retry: r.Retry})
		}
	}
	checkParentRefs(&errs, common.ParentRefs)
	checkRouteHostnames(&errs, hostnames)
	for i, r := range rules {
		f := idx("spec.rules", i)
		r.matches(&errs, f+".matches")
		checkHTTPFilters(&errs, f+".filters", r.filters, grpc)
		for j, b := range r.backends {
			checkBackendRef(&errs, idx(f+".backendRefs", j), b.BackendObjectReference, b.Weight)
			checkHTTPFilters(&errs, idx(f+".backendRefs", j)+".filters", b.Filters, grpc)
		}
		if t := r.timeouts; t != nil {
			checkGatewayDuration(&errs, f+".timeouts.request", t.Request)
			checkGatewayDuration(&errs, f+".timeouts.backendRequest", t.BackendRequest)
		}
		if rt := r.retry; rt != nil {
			checkGatewayDuration(&errs, f+".retry.backoff", rt.Backoff)
			for j, code := range rt.Codes {
				if code < 400 || code > 599 {
					errs.Add(idx(f+".retry.codes", j), "%d is not an HTTP error status (400-599)", code)
				}
			}
		}
	}
	return errs
}

func checkHTTPMatches(errs *Errors, f string, matches []gwapi.HTTPRouteMatch) {
	for j, m := range matches {
		mf := idx(f, j)
		if p := m.Path; p != nil {
			t := gwapi.Deref(p.Type, "PathPrefix")
			v := gwapi.Deref(p.Value, "/")
			switch t {
			case "Exact", "PathPrefix":
				if !strings.HasPrefix(v, "/") {
					errs.Add(mf+".path.value", "%q must start with /", v)
				}
			case "RegularExpression":
			default:
				errs.Add(mf+".path.type", "unknown type %q (Exact, PathPrefix or RegularExpression)", t)
			}
		}
		checkHeaderMatches(errs, mf+".headers", m.Headers)
		for k, q := range m.QueryParams {
			if q.Name == "" {
				errs.Add(idx(mf+".queryParams", k)+".name", "required")
			}
		}
	}
}

func checkGRPCMatches(errs *Errors, f string, matches []gwapi.GRPCRouteMatch) {
	for j, m := range matches {
		mf := idx(f, j)
		if mm := m.Method; mm != nil {
			t := gwapi.Deref(mm.Type, "Exact")
			if t != "Exact" && t != "RegularExpression" {
				errs.Add(mf+".method.type", "unknown type %q (Exact or RegularExpression)", t)
			}
			if mm.Service == nil && mm.Method == nil {
				errs.Add(mf+".method", "one of service and method is required")
			}
		}
		checkHeaderMatches(errs, mf+".headers", m.Headers)
	}
}

// corsOrigin is the CRD's pattern of an allowed origin.
var corsOrigin = regexp.MustCompile(`(^\*$)|(^(http(s)?):\/\/(((\*\.)?([a-zA-Z0-9\-]+\.)*[a-zA-Z0-9-]+|\*)(:([0-9]{1,5}))?)$)`)

// checkGatewayCORS checks a CORS filter as the CRD's CEL rules: "*"
// stands alone in allowOrigins, allowMethods and allowHeaders.
func checkGatewayCORS(errs *Errors, f string, c *gwapi.HTTPCORSFilter) {
	for _, l := range []struct {
		field string
		list  []string
	}{{"allowOrigins", c.AllowOrigins}, {"allowMethods", c.AllowMethods}, {"allowHeaders", c.AllowHeaders}} {
		if len(l.list) > 1 && slices.Contains(l.list, "*") {
			errs.Add(f+"."+l.field, "%q cannot be listed with other values", "*")
		}
	}
	for i, o := range c.AllowOrigins {
		if !corsOrigin.MatchString(o) {
			errs.Add(idx(f+".allowOrigins", i), "%q is not an origin (\"*\" or scheme://host[:port], host may start with \"*.\" or be \"*\")", o)
		}
	}
	if c.MaxAge < 0 {
		errs.Add(f+".maxAge", "%d is not a positive number of seconds", c.MaxAge)
	}
}

func checkL4Rules(errs *Errors, rules []gwapi.L4Rule) {
	for i, r := range rules {
		for j, b := range r.BackendRefs {
			checkBackendRef(errs, idx(idx("spec.rules", i)+".backendRefs", j), b.BackendObjectReference, b.Weight)
		}
	}
}

func validateTCPRoute(c *Config) Errors {
	var errs Errors
	var s gwapi.TCPRouteSpec
	if decodeInto(&errs, c, &s) {
		checkParentRefs(&errs, s.ParentRefs)
		checkL4Rules(&errs, s.Rules)
	}
	return errs
}

func validateTLSRoute(c *Config) Errors {
	var errs Errors
	var s gwapi.TLSRouteSpec
	if decodeInto(&errs, c, &s) {
		checkParentRefs(&errs, s.ParentRefs)
		checkRouteHostnames(&errs, s.Hostnames)
		checkL4Rules(&errs, s.Rules)
	}
	return errs
}

func validateReferenceGrant(c *Config) Errors {
	var errs Errors
	var s gwapi.ReferenceGrantSpec
	if !decodeInto(&errs, c, &s) {
		return errs
	}
	if len(s.From) == 0 {
		errs.Add("spec.from", "at least one entry is required")
	}
	if len(s.To) == 0 {
		errs.Add("spec.to", "at least one entry is required")
	}
	for i, f := range s.From {
		if f.Kind == "" {
			errs.Add(idx("spec.from", i)+".kind", "required")
		}
		if !isNamespace(f.Namespace) {
			errs.Add(idx("spec.from", i)+".namespace", "%q is not a namespace name", f.Namespace)
		}
	}
	for i, t := range s.To {
		if t.Kind == "" {
			errs.Add(idx("spec.to", i)+".kind", "required")
		}
	}
	return errs
}

func validateBackendTLSPolicy(c *Config) Errors {
	var errs Errors
	var s gwapi.BackendTLSPolicySpec
	if !decodeInto(&errs, c, &s) {
		return errs
	}
	if len(s.TargetRefs) == 0 {
		errs.Add("spec.targetRefs", "at least one target is required")
	}
	for i, t := range s.TargetRefs {
		f := idx("spec.targetRefs", i)
		if t.Kind == "" {
			errs.Add(f+".kind", "required")
		}
		if t.Name == "" {
			errs.Add(f+".name", "required")
		}
	}
	v := s.Validation
	switch {
	case v.Hostname == "":
		errs.Add("spec.validation.hostname", "required")
	case strings.HasPrefix(v.Hostname, "*") || isIP(v.Hostname):
		errs.Add("spec.validation.hostname", "%q is not a precise hostname", v.Hostname)
	}
	if (len(v.CACertificateRefs) == 0) == (v.WellKnownCACertificates == nil) {
		errs.Add("spec.validation", "exactly one of caCertificateRefs and wellKnownCACertificates must be set")
	}
	for i, san := range v.SubjectAltNames {
		f := idx("spec.validation.subjectAltNames", i)
		switch san.Type {
		case "Hostname":
			if san.Hostname == "" || san.URI != "" {
				errs.Add(f, "type Hostname needs hostname (only)")
			}
		case "URI":
			if san.URI == "" || san.Hostname != "" {
				errs.Add(f, "type URI needs uri (only)")
			}
		default:
			errs.Add(f+".type", "unknown type %q (Hostname or URI)", san.Type)
		}
	}
	return errs
}

func validateListenerSet(c *Config) Errors {
	var errs Errors
	var s gwapi.ListenerSetSpec
	if !decodeInto(&errs, c, &s) {
		return errs
	}
	if s.ParentRef.Name == "" {
		errs.Add("spec.parentRef.name", "required")
	}
	if len(s.Listeners) == 0 {
		errs.Add("spec.listeners", "at least one listener is required")
	}
	checkListeners(&errs, "spec.listeners", s.Listeners, true)
	return errs
}
