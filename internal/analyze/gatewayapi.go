package analyze

import (
	"fmt"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/gatewayapi"
)

// Codes of the Gateway API checks (Istio reports these through status
// only, so it has no analyzer codes for them).
var (
	// GatewayAPIRouteNotAttached: a route's parentRef binds nothing (no
	// such gateway or service, or no listener allows the route).
	GatewayAPIRouteNotAttached = Code{"BM0002", "GatewayAPIRouteNotAttached", Error}
	// GatewayAPIReferenceNotPermitted: a reference to another namespace
	// that no ReferenceGrant there allows.
	GatewayAPIReferenceNotPermitted = Code{"BM0003", "GatewayAPIReferenceNotPermitted", Error}
	// GatewayAPIListenerInvalid: a Gateway listener that is not programmed.
	GatewayAPIListenerInvalid = Code{"BM0004", "GatewayAPIListenerInvalid", Warning}
	// GatewayAPIPolicyNotApplied: a BackendTLSPolicy that applies to
	// nothing (its target does not exist, an older policy has it, or its
	// CA cannot be used).
	GatewayAPIPolicyNotApplied = Code{"BM0005", "GatewayAPIPolicyNotApplied", Error}
)

// gatewayAPI runs the Gateway API conversion over the resources and
// reports what its status says is wrong: unbound routes, references a
// ReferenceGrant is missing for, backends no ServiceEntry declares, and
// listeners that are not programmed, BackendTLSPolicies not applied.
func gatewayAPI(ix *index) []Message {
	vals := func(k config.Kind) []config.Config {
		out := make([]config.Config, 0, len(ix.byKind[k]))
		for _, c := range ix.byKind[k] {
			out = append(out, *c)
		}
		return out
	}
	routes := 0
	for _, k := range []config.Kind{config.HTTPRoute, config.GRPCRoute, config.TCPRoute, config.TLSRoute, config.KubernetesGateway, config.BackendTLSPolicy} {
		routes += len(ix.byKind[k])
	}
	if routes == 0 {
		return nil
	}
	res := gatewayapi.Convert(gatewayapi.Input{
		Classes: vals(config.GatewayClass), Gateways: vals(config.KubernetesGateway),
		HTTPRoutes: vals(config.HTTPRoute), GRPCRoutes: vals(config.GRPCRoute),
		TCPRoutes: vals(config.TCPRoute), TLSRoutes: vals(config.TLSRoute),
		Grants: vals(config.ReferenceGrant), ServiceEntries: vals(config.ServiceEntry),
		BackendTLSPolicies: vals(config.BackendTLSPolicy), ListenerSets: vals(config.ListenerSet),
		HasService: func(h, _ string) bool { return ix.hostExists(h) },
	})
	var out []Message
	for _, k := range []config.Kind{config.HTTPRoute, config.GRPCRoute, config.TCPRoute, config.TLSRoute} {
		for _, c := range ix.byKind[k] {
			st := res.Status[c.Key()]
			if st == nil {
				continue
			}
			for i, p := range st.Parents {
				ref := fmt.Sprintf("parentRefs[%d] (%s %s/%s)", i, p.ParentRef.Kind, p.ParentRef.Namespace, p.ParentRef.Name)
				for _, cond := range p.Conditions {
					if cond.Status != "False" {
						continue
					}
					switch {
					case cond.Type == "Accepted":
						out = append(out, msg(c, GatewayAPIRouteNotAttached, "%s: not attached: %s: %s", ref, cond.Reason, cond.Message))
					case cond.Reason == "RefNotPermitted":
						out = append(out, msg(c, GatewayAPIReferenceNotPermitted, "%s", cond.Message))
					case cond.Reason == "BackendNotFound":
						out = append(out, msg(c, ReferencedResourceNotFound, "Referenced backend not found: %s", cond.Message))
					case cond.Type == "ResolvedRefs":
						out = append(out, msg(c, ReferencedResourceNotFound, "%s: %s", cond.Reason, cond.Message))
					}
				}
			}
		}
	}
	for _, c := range ix.byKind[config.KubernetesGateway] {
		st := res.Status[c.Key()]
		if st == nil {
			continue
		}
		for _, l := range st.Listeners {
			for _, cond := range l.Conditions {
				if cond.Type == "Programmed" && cond.Status == "False" {
					out = append(out, msg(c, GatewayAPIListenerInvalid, "listener %s not programmed: %s", l.Name, cond.Message))
				}
			}
		}
	}
	for _, c := range ix.byKind[config.BackendTLSPolicy] {
		if st := res.Status[c.Key()]; st != nil {
			if cond, ok := st.Condition("Accepted"); ok && cond.Status == "False" {
				out = append(out, msg(c, GatewayAPIPolicyNotApplied, "not applied: %s: %s", cond.Reason, cond.Message))
			}
		}
	}
	return out
}
