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
	name string // Istio's "ns[NS]-policy[NAME]"
	ap   *security.AuthorizationPolicy
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
			p := policy{name: "ns[" + c.Namespace + "]-policy[" + c.Name + "]", ap: ap}
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
// CUSTOM policies are not among them (CustomHTTPFilters).
func (p Policies) RBACs(tcp bool) []*rbacv3.RBAC { return p.rbacs(tcp, false) }

// rbacs is RBACs, with CUSTOM policies enforced as DENY when
// customAsDeny (proxyless gRPC, which has no ext_authz).
func (p Policies) rbacs(tcp, customAsDeny bool) []*rbacv3.RBAC {
	var out []*rbacv3.RBAC
	if r := p.build(p.audit, rbacv3.RBAC_LOG, tcp); len(r.Policies) > 0 {
		out = append(out, r)
	}
	deny := p.deny
	if customAsDeny {
		deny = append(slices.Clip(deny), p.custom...)
	}
	if r := p.build(deny, rbacv3.RBAC_DENY, tcp); len(r.Policies) > 0 {
		out = append(out, r)
	}
	if len(p.allow) > 0 {
		// Even with no rule left: an ALLOW policy denies what it does
		// not allow.
		out = append(out, p.build(p.allow, rbacv3.RBAC_ALLOW, tcp))
	}
	return out
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

func (p Policies) httpFilters(unique bool) []*hcmv3.HttpFilter {
	var out []*hcmv3.HttpFilter
	for _, r := range p.rbacs(false, unique) {
		name := HTTPFilterName
		if unique && r.Action != rbacv3.RBAC_ALLOW {
			name += "." + strings.ToUpper(actionName(r.Action))
		}
		out = append(out, &hcmv3.HttpFilter{Name: name, ConfigType: &hcmv3.HttpFilter_TypedConfig{
			TypedConfig: gen.MustAny(&rbachttpv3.RBAC{Rules: r}),
		}})
	}
	return out
}

// NetworkFilters are the network RBAC filters for a TCP port, to go
// before tcp_proxy.
func (p Policies) NetworkFilters() []*listenerv3.Filter {
	var out []*listenerv3.Filter
	for _, r := range p.RBACs(true) {
		out = append(out, &listenerv3.Filter{Name: NetworkFilterName, ConfigType: &listenerv3.Filter_TypedConfig{
			TypedConfig: gen.MustAny(&rbacnetv3.RBAC{Rules: r, StatPrefix: "tcp."}),
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
