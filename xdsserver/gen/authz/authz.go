// Package authz translates Istio AuthorizationPolicies into Envoy RBAC
// filters for a workload: HTTP RBAC (envoy.filters.http.rbac) for HTTP
// ports and proxyless gRPC servers, network RBAC
// (envoy.filters.network.rbac) for TCP ports. Istio's evaluation order:
// AUDIT (logged only), CUSTOM and DENY, then ALLOW; once an ALLOW policy
// selects the workload, whatever no ALLOW rule matches is denied. A rule
// that cannot be honoured (HTTP-only fields on a TCP port, keys the data
// plane cannot see) is made deny-safe as Istio does: an ALLOW rule is
// dropped, a DENY rule keeps the parts that apply. CUSTOM policies send
// what they select to the external authorizer their mesh config
// extension provider names (ext_authz, custom.go); one naming no usable
// provider denies what it selects, as istiod's. Proxyless gRPC has no
// ext_authz: there CUSTOM is enforced as DENY (istiod's gRPC generator
// drops CUSTOM policies, letting through what they would check). The
// jwt_authn filter of RequestAuthentications (jwt.go) lives here too:
// rules on request principals and claims match what it verified.
//
// A policy annotated istio.io/dry-run: "true" is evaluated, not enforced,
// as istiod builds it: its rules go to the RBAC filter's shadow_rules
// (Envoy counts and logs what they would have done), beside the rules of
// the same action that are enforced. Proxyless gRPC evaluates no shadow
// rules, so there a dry-run policy is left out (istiod's grpcgen ignores
// the annotation and enforces it). CUSTOM policies are not dry-run: the
// annotation is not read for them, and the authorizer decides, as for
// any CUSTOM policy (istiod moves them into enforcing DENY rules).
//
// It imports core and xdsserver/gen (scope) only.
package authz

import (
	"slices"
	"strconv"
	"strings"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	rbachttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	rbacnetv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/rbac/v3"
	security "istio.io/api/security/v1beta1"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/push"
	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/scope"
)

// Filter names, as Istio and grpc-go know them.
const (
	HTTPFilterName    = "envoy.filters.http.rbac"
	NetworkFilterName = "envoy.filters.network.rbac"
)

// policy is one selected AuthorizationPolicy.
type policy struct {
	name   string // Istio's "ns[NS]-policy[NAME]"
	ap     *security.AuthorizationPolicy
	dryRun bool // istio.io/dry-run: shadow rules, not enforced
}

// DryRunAnnotation marks an AuthorizationPolicy to be evaluated without
// being enforced. A value strconv.ParseBool does not read is false, as
// istiod reads it: the policy is enforced.
const DryRunAnnotation = "istio.io/dry-run"

func isDryRun(annotations map[string]string) bool {
	on, err := strconv.ParseBool(annotations[DryRunAnnotation])
	return err == nil && on
}

// Policies are the AuthorizationPolicies that select one workload, by
// action.
type Policies struct {
	audit, deny, allow, custom []policy
	trustDomain                string
}

// Empty reports whether no policy selects the workload.
func (p Policies) Empty() bool { return len(p.audit)+len(p.deny)+len(p.allow)+len(p.custom) == 0 }

// For returns the policies that select a workload in namespace ns with
// labels: those of the root namespace (mesh-wide) and of ns, without a
// selector or with one matching labels. Policies with targetRef(s) apply
// to gateways and waypoints, not to sidecars, and are left out.
func For(pc *push.PushContext, ns string, labels map[string]string) Policies {
	out := Policies{trustDomain: "cluster.local"}
	if m := pc.Mesh; m != nil && m.GetTrustDomain() != "" {
		out.trustDomain = m.GetTrustDomain()
	}
	root := scope.RootNamespace(pc)
	nss := []string{root}
	if ns != root {
		nss = append(nss, ns)
	}
	for _, n := range nss {
		for _, c := range pc.ConfigsIn(config.AuthorizationPolicy, n) {
			ap := c.Spec.(*security.AuthorizationPolicy)
			if ap.GetTargetRef() != nil || len(ap.GetTargetRefs()) > 0 {
				continue
			}
			if sel := ap.GetSelector().GetMatchLabels(); len(sel) > 0 && !scope.LabelsMatch(sel, labels) {
				continue
			}
			p := policy{name: "ns[" + c.Namespace + "]-policy[" + c.Name + "]", ap: ap, dryRun: isDryRun(c.Annotations)}
			switch ap.GetAction() {
			case security.AuthorizationPolicy_ALLOW:
				out.allow = append(out.allow, p)
			case security.AuthorizationPolicy_DENY:
				out.deny = append(out.deny, p)
			case security.AuthorizationPolicy_CUSTOM:
				out.custom = append(out.custom, p)
			case security.AuthorizationPolicy_AUDIT:
				out.audit = append(out.audit, p)
			}
		}
	}
	return out
}

// RBACs are the RBAC configs to enforce in order (AUDIT, DENY, ALLOW);
// tcp builds them for a TCP port (HTTP-only fields made deny-safe).
// CUSTOM policies are not among them (CustomHTTPFilters), nor are
// dry-run policies (their shadow rules are in the filters).
func (p Policies) RBACs(tcp bool) []*rbacv3.RBAC {
	var out []*rbacv3.RBAC
	for _, r := range p.rbacs(tcp, false) {
		if r.rules != nil {
			out = append(out, r.rules)
		}
	}
	return out
}

// actionRBAC is one action's RBAC filter: the rules it enforces (nil when
// every policy of the action is a dry run) and its shadow rules (the
// dry-run policies; nil when there are none).
type actionRBAC struct {
	action        rbacv3.RBAC_Action
	rules, shadow *rbacv3.RBAC
}

// rbacs are the actions' RBAC filters in order (AUDIT, DENY, ALLOW). For
// proxyless gRPC, which has no ext_authz and evaluates no shadow rules,
// CUSTOM policies are enforced as DENY and dry-run policies are left out.
func (p Policies) rbacs(tcp, proxyless bool) []actionRBAC {
	var out []actionRBAC
	add := func(ps []policy, action rbacv3.RBAC_Action) {
		var enforced, dry []policy
		for _, pol := range ps {
			if pol.dryRun && pol.ap.GetAction() != security.AuthorizationPolicy_CUSTOM {
				dry = append(dry, pol)
			} else {
				enforced = append(enforced, pol)
			}
		}
		a := actionRBAC{action: action}
		// An ALLOW policy denies what it does not allow, even with no
		// rule left.
		if r := p.build(enforced, action, tcp); len(r.Policies) > 0 || action == rbacv3.RBAC_ALLOW && len(enforced) > 0 {
			a.rules = r
		}
		if len(dry) > 0 && !proxyless {
			a.shadow = p.build(dry, action, tcp) // even empty, as istiod's
		}
		if a.rules != nil || a.shadow != nil {
			out = append(out, a)
		}
	}
	add(p.audit, rbacv3.RBAC_LOG)
	deny := p.deny
	if proxyless {
		deny = append(slices.Clip(deny), p.custom...)
	}
	add(deny, rbacv3.RBAC_DENY)
	add(p.allow, rbacv3.RBAC_ALLOW)
	return out
}

// shadowStatPrefix is istiod's shadow_rules_stat_prefix of an RBAC
// filter, by its shadow rules' action; without shadow rules istiod reads
// the action as ALLOW (the zero value), and the prefix then names
// nothing.
func shadowStatPrefix(shadow *rbacv3.RBAC) string {
	switch shadow.GetAction() {
	case rbacv3.RBAC_ALLOW:
		return "istio_dry_run_allow_"
	case rbacv3.RBAC_DENY:
		return "istio_dry_run_deny_"
	}
	return ""
}

func (p Policies) build(ps []policy, action rbacv3.RBAC_Action, tcp bool) *rbacv3.RBAC {
	out := &rbacv3.RBAC{Action: action, Policies: map[string]*rbacv3.Policy{}}
	b := builder{tcp: tcp, allow: action == rbacv3.RBAC_ALLOW, td: p.trustDomain}
	for _, pol := range ps {
		for i, r := range pol.ap.GetRules() {
			if r == nil {
				continue
			}
			if rp, ok := b.rule(r); ok {
				out.Policies[pol.name+"-rule["+strconv.Itoa(i)+"]"] = rp
			}
		}
	}
	return out
}

// HTTPFilters are the HTTP RBAC filters for a proxyless gRPC server, to
// go before the router: names unique per chain (grpc-go refuses
// duplicates), "envoy.filters.http.rbac" suffixed with the action but for
// ALLOW, as istiod's grpcgen.
func (p Policies) HTTPFilters() []*hcmv3.HttpFilter { return p.httpFilters(true) }

// EnvoyHTTPFilters are the HTTP RBAC filters for Envoy, all named
// "envoy.filters.http.rbac" as istiod names them (Envoy takes duplicate
// names).
func (p Policies) EnvoyHTTPFilters() []*hcmv3.HttpFilter { return p.httpFilters(false) }

func (p Policies) httpFilters(proxyless bool) []*hcmv3.HttpFilter {
	var out []*hcmv3.HttpFilter
	for _, r := range p.rbacs(false, proxyless) {
		name, cfg := HTTPFilterName, &rbachttpv3.RBAC{Rules: r.rules}
		if proxyless {
			if r.action != rbacv3.RBAC_ALLOW {
				name += "." + strings.ToUpper(actionName(r.action))
			}
		} else {
			cfg.ShadowRules, cfg.ShadowRulesStatPrefix = r.shadow, shadowStatPrefix(r.shadow)
		}
		out = append(out, &hcmv3.HttpFilter{Name: name, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: gen.MustAny(cfg)}})
	}
	return out
}

// NetworkFilters are the network RBAC filters for a TCP port, to go
// before tcp_proxy.
func (p Policies) NetworkFilters() []*listenerv3.Filter {
	var out []*listenerv3.Filter
	for _, r := range p.rbacs(true, false) {
		out = append(out, &listenerv3.Filter{Name: NetworkFilterName, ConfigType: &listenerv3.Filter_TypedConfig{
			TypedConfig: gen.MustAny(&rbacnetv3.RBAC{Rules: r.rules, StatPrefix: "tcp.", ShadowRules: r.shadow, ShadowRulesStatPrefix: shadowStatPrefix(r.shadow)}),
		}})
	}
	return out
}

func actionName(a rbacv3.RBAC_Action) string {
	switch a {
	case rbacv3.RBAC_DENY:
		return "deny"
	case rbacv3.RBAC_LOG:
		return "audit"
	}
	return "allow"
}
