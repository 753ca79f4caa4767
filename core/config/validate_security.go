package config

// Validation of the security.istio.io kinds, after istio/istio
// pkg/config/validation/validation.go and pkg/config/security.

import (
	"strconv"
	"strings"

	security "istio.io/api/security/v1beta1"
	typev1beta1 "istio.io/api/type/v1beta1"
)

func validatePeerAuthentication(c *Config) Errors {
	var errs Errors
	pa := c.Spec.(*security.PeerAuthentication)
	checkMatchLabels(&errs, "spec.selector", pa.GetSelector())
	if m := pa.GetMtls(); m != nil {
		checkEnum(&errs, "spec.mtls.mode", m.GetMode())
	}
	if len(pa.GetPortLevelMtls()) > 0 && len(pa.GetSelector().GetMatchLabels()) == 0 {
		errs.Add("spec.portLevelMtls", "port level mTLS needs a selector with labels; a mesh or namespace wide policy cannot set it")
	}
	for port, m := range pa.GetPortLevelMtls() {
		f := portKey("spec.portLevelMtls", port)
		checkPort(&errs, f, port)
		if m == nil {
			errs.Add(f, "must not be null")
			continue
		}
		checkEnum(&errs, f+".mode", m.GetMode())
	}
	return errs
}

func validateAuthorizationPolicy(c *Config) Errors {
	var errs Errors
	ap := c.Spec.(*security.AuthorizationPolicy)
	checkEnum(&errs, "spec.action", ap.GetAction())
	checkMatchLabels(&errs, "spec.selector", ap.GetSelector())
	set := 0
	if ap.GetSelector() != nil {
		set++
	}
	if ap.GetTargetRef() != nil {
		set++
		checkTargetRef(&errs, "spec.targetRef", ap.GetTargetRef())
	}
	if len(ap.GetTargetRefs()) > 0 {
		set++
		for i, r := range ap.GetTargetRefs() {
			checkTargetRef(&errs, idx("spec.targetRefs", i), r)
		}
	}
	if set > 1 {
		errs.Add("spec.selector", "only one of selector, targetRef and targetRefs may be set")
	}

	action := ap.GetAction()
	if action == security.AuthorizationPolicy_CUSTOM {
		if ap.GetRules() == nil {
			errs.Add("spec.rules", "a CUSTOM policy without rules never applies; add an empty rule {} to match every request")
		} else if ap.GetProvider().GetName() == "" {
			errs.Add("spec.provider.name", "a CUSTOM policy needs a provider name")
		}
	} else if ap.GetProvider() != nil {
		errs.Add("spec.provider", "provider is allowed only with action CUSTOM, not %s", action)
	}
	if action == security.AuthorizationPolicy_DENY && ap.GetRules() == nil {
		errs.Add("spec.rules", "a DENY policy without rules never applies; add an empty rule {} to match every request")
	}

	for i, r := range ap.GetRules() {
		f := idx("spec.rules", i)
		if r == nil {
			errs.Add(f, "rule must not be null")
			continue
		}
		if r.From != nil && len(r.GetFrom()) == 0 {
			errs.Add(f+".from", "must not be an empty list")
		}
		for j, from := range r.GetFrom() {
			checkSource(&errs, idx(f+".from", j)+".source", from.GetSource(), action)
		}
		if r.To != nil && len(r.GetTo()) == 0 {
			errs.Add(f+".to", "must not be an empty list")
		}
		for j, to := range r.GetTo() {
			checkOperation(&errs, idx(f+".to", j)+".operation", to.GetOperation())
		}
		for j, cond := range r.GetWhen() {
			checkCondition(&errs, idx(f+".when", j), cond, action)
		}
	}
	return errs
}

func checkTargetRef(errs *Errors, f string, r *typev1beta1.PolicyTargetReference) {
	if r == nil {
		errs.Add(f, "must not be null")
		return
	}
	if r.GetName() == "" {
		errs.Add(f+".name", "name is required")
	}
	if r.GetNamespace() != "" {
		errs.Add(f+".namespace", "cross-namespace references are not supported")
	}
	group := r.GetGroup()
	switch {
	case (group == "" || group == "core") && r.GetKind() == "Service":
	case group == NetworkingGroup && r.GetKind() == string(ServiceEntry):
	case group == "gateway.networking.k8s.io" && (r.GetKind() == "Gateway" || r.GetKind() == "GatewayClass"):
	default:
		errs.Add(f+".kind", "%s/%s is not a supported target; use Service, ServiceEntry, Gateway or GatewayClass", group, r.GetKind())
	}
}

func checkSource(errs *Errors, f string, s *security.Source, action security.AuthorizationPolicy_Action) {
	if s == nil {
		errs.Add(f, "source is required")
		return
	}
	lists := []struct {
		name string
		v    []string
	}{
		{"principals", s.GetPrincipals()}, {"notPrincipals", s.GetNotPrincipals()},
		{"requestPrincipals", s.GetRequestPrincipals()}, {"notRequestPrincipals", s.GetNotRequestPrincipals()},
		{"namespaces", s.GetNamespaces()}, {"notNamespaces", s.GetNotNamespaces()},
		{"serviceAccounts", s.GetServiceAccounts()}, {"notServiceAccounts", s.GetNotServiceAccounts()},
		{"ipBlocks", s.GetIpBlocks()}, {"notIpBlocks", s.GetNotIpBlocks()},
		{"remoteIpBlocks", s.GetRemoteIpBlocks()}, {"notRemoteIpBlocks", s.GetNotRemoteIpBlocks()},
		{"trustDomains", s.GetTrustDomains()}, {"notTrustDomains", s.GetNotTrustDomains()},
	}
	n := 0
	for _, l := range lists {
		n += len(l.v)
		checkNoEmpty(errs, f+"."+l.name, l.v)
	}
	if n == 0 {
		errs.Add(f, "a source needs at least one field")
	}
	if len(s.GetServiceAccounts())+len(s.GetNotServiceAccounts()) > 0 &&
		len(s.GetPrincipals())+len(s.GetNotPrincipals())+len(s.GetNamespaces())+len(s.GetNotNamespaces()) > 0 {
		errs.Add(f+".serviceAccounts", "serviceAccounts cannot be combined with principals or namespaces")
	}
	for _, l := range lists[6:8] {
		for i, sa := range l.v {
			if sa != "" && strings.Count(sa, "/") != 1 {
				errs.Add(idx(f+"."+l.name, i), "%q must have the form namespace/name", sa)
			}
		}
	}
	for _, l := range lists[8:12] {
		for i, b := range l.v {
			if b != "" {
				checkIPOrCIDR(errs, idx(f+"."+l.name, i), b)
			}
		}
	}
	for _, l := range lists[:2] {
		for i, p := range l.v {
			checkPrincipal(errs, idx(f+"."+l.name, i), p)
		}
	}
	for _, l := range append(lists[2:6:6], lists[12:]...) {
		for i, v := range l.v {
			checkGlob(errs, idx(f+"."+l.name, i), v)
		}
	}
	if action == security.AuthorizationPolicy_CUSTOM {
		for _, l := range lists[:8] {
			if len(l.v) > 0 {
				errs.Add(f+"."+l.name, "is not supported with action CUSTOM")
			}
		}
	}
}

func checkOperation(errs *Errors, f string, op *security.Operation) {
	if op == nil {
		errs.Add(f, "operation is required")
		return
	}
	lists := []struct {
		name string
		v    []string
	}{
		{"hosts", op.GetHosts()}, {"notHosts", op.GetNotHosts()},
		{"ports", op.GetPorts()}, {"notPorts", op.GetNotPorts()},
		{"methods", op.GetMethods()}, {"notMethods", op.GetNotMethods()},
		{"paths", op.GetPaths()}, {"notPaths", op.GetNotPaths()},
	}
	n := 0
	for _, l := range lists {
		n += len(l.v)
		checkNoEmpty(errs, f+"."+l.name, l.v)
	}
	if n == 0 {
		errs.Add(f, "an operation needs at least one field")
	}
	for _, l := range lists[2:4] {
		for i, p := range l.v {
			if p != "" {
				checkPortString(errs, idx(f+"."+l.name, i), p)
			}
		}
	}
	for _, l := range lists[6:8] {
		for i, p := range l.v {
			checkAuthzPath(errs, idx(f+"."+l.name, i), p)
		}
	}
	for _, l := range append(lists[0:2:2], lists[4:6]...) {
		for i, v := range l.v {
			checkGlob(errs, idx(f+"."+l.name, i), v)
		}
	}
}

// checkPrincipal: Istio's principals are SPIFFE IDs without the
// "spiffe://" scheme ("cluster.local/ns/NS/sa/SA"); one written with it
// would never match.
func checkPrincipal(errs *Errors, f, p string) {
	if strings.HasPrefix(p, "spiffe://") {
		errs.Add(f, "%q: write principals without \"spiffe://\" (%q)", p, strings.TrimPrefix(p, "spiffe://"))
		return
	}
	checkGlob(errs, f, p)
	if strings.ContainsAny(p, " \t\n") {
		errs.Add(f, "%q: a principal has no whitespace", p)
	}
}

// checkGlob: a match value may have one '*', at its start or its end
// (or be "*"), as Istio matches prefixes and suffixes only.
func checkGlob(errs *Errors, f, v string) {
	if v == "*" || v == "" {
		return
	}
	inner := strings.TrimSuffix(strings.TrimPrefix(v, "*"), "*")
	if strings.Contains(inner, "*") || (strings.HasPrefix(v, "*") && strings.HasSuffix(v, "*")) {
		errs.Add(f, "%q: '*' is allowed only at the start or the end", v)
	}
}

// checkAuthzPath: a path to match is "*", starts with '/' or is a suffix
// ("*.html"); it has no query, fragment, whitespace or control
// characters; '*' only at its start or end, or in the templates "{*}"
// and "{**}" as whole segments ("{**}" last).
func checkAuthzPath(errs *Errors, f, p string) {
	if p == "" || p == "*" {
		return
	}
	for _, r := range p {
		if r <= ' ' || r == 0x7f || r == '?' || r == '#' {
			errs.Add(f, "%q: %q is not allowed in a path", p, r)
			return
		}
	}
	if !strings.HasPrefix(p, "/") && !strings.HasPrefix(p, "*") {
		errs.Add(f, "%q: a path starts with '/' (or '*' for a suffix)", p)
		return
	}
	if strings.Contains(p, "{") || strings.Contains(p, "}") {
		segs := strings.Split(p, "/")
		for i, seg := range segs {
			switch {
			case seg == "{*}":
			case seg == "{**}" && i == len(segs)-1:
			case strings.ContainsAny(seg, "{}"):
				errs.Add(f, "%q: templates are the whole segments {*} and {**} ({**} last)", p)
				return
			}
		}
		if strings.Contains(strings.NewReplacer("{**}", "", "{*}", "").Replace(p), "*") {
			errs.Add(f, "%q: a template path has no other '*'", p)
		}
		return
	}
	checkGlob(errs, f, p)
}

func checkPortString(errs *Errors, f, p string) {
	n, err := strconv.ParseUint(p, 10, 32)
	if err != nil || n < 1 || n > 65535 {
		errs.Add(f, "%q is not a port number in the range 1..65535", p)
	}
}

func checkNoEmpty(errs *Errors, f string, v []string) {
	for i, s := range v {
		if s == "" {
			errs.Add(idx(f, i), "must not be an empty string")
		}
	}
}

// conditionKeys are the keys of a when condition; a key ending in '['
// takes a name in brackets ("request.headers[x-user]").
var conditionKeys = map[string]bool{
	"request.headers[": true, "request.auth.claims[": true,
	"source.ip": true, "remote.ip": true, "source.namespace": true, "source.principal": true,
	"source.serviceAccount": true, "request.auth.principal": true, "request.auth.audiences": true,
	"request.auth.presenter": true, "destination.ip": true, "destination.port": true,
	"connection.sni": true,
}

func checkCondition(errs *Errors, f string, c *security.Condition, action security.AuthorizationPolicy_Action) {
	if c == nil {
		errs.Add(f, "condition must not be null")
		return
	}
	key := c.GetKey()
	if key == "" {
		errs.Add(f+".key", "key is required")
		return
	}
	known := conditionKeys[key] || strings.HasPrefix(key, "experimental.envoy.filters.")
	if open := strings.IndexByte(key, '['); open > 0 && strings.HasSuffix(key, "]") && len(key) > open+2 {
		known = known || conditionKeys[key[:open+1]]
	}
	if !known {
		errs.Add(f+".key", "unknown condition key %q", key)
	}
	if len(c.GetValues()) == 0 && len(c.GetNotValues()) == 0 {
		errs.Add(f, "at least one of values and notValues is required")
	}
	checkNoEmpty(errs, f+".values", c.GetValues())
	checkNoEmpty(errs, f+".notValues", c.GetNotValues())
	for _, l := range []struct {
		name string
		v    []string
	}{{"values", c.GetValues()}, {"notValues", c.GetNotValues()}} {
		for i, v := range l.v {
			switch {
			case v == "":
			case key == "source.ip" || key == "remote.ip" || key == "destination.ip":
				checkIPOrCIDR(errs, idx(f+"."+l.name, i), v)
			case key == "destination.port":
				checkPortString(errs, idx(f+"."+l.name, i), v)
			}
		}
	}
	if action == security.AuthorizationPolicy_CUSTOM {
		switch {
		case key == "source.namespace", key == "source.serviceAccount", key == "source.principal",
			strings.HasPrefix(key, "request.auth."):
			errs.Add(f+".key", "%q is not supported with action CUSTOM", key)
		}
	}
}
