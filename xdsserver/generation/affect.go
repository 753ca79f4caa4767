package generation

import (
	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/core/push"
	"github.com/baremesh/baremesh/xdsserver/gen/scope"
	"github.com/baremesh/baremesh/xdsserver/xdstype"
)

// Affected says which types a full push can change for proxy p: a
// change it cannot see (a Gateway or a gateway-only VirtualService for a
// sidecar, a service outside its Sidecar scope or not exported to it, a
// Sidecar of another namespace) pushes nothing, and a change of one kind
// regenerates only the types that kind feeds (xdstype's Affects).
// Anything it cannot judge (a removed service, the mesh config, a kind no
// type lists) affects everything.
func Affected(types []*xdstype.Type, pc *push.PushContext, p *model.Proxy, req *push.Request) map[*xdstype.Type]bool {
	out := map[*xdstype.Type]bool{}
	all := func() map[*xdstype.Type]bool {
		for _, t := range types {
			out[t] = true
		}
		return out
	}
	if req != nil && req.Reasons.Has(push.ReasonCredentials) {
		// Credentials reach gateways only (their LDS leaves out servers
		// whose credential cannot be served, and their SDS).
		if p.Type == model.Router {
			return all()
		}
		if len(req.Configs)+len(req.Services) == 0 && !req.Reasons.Global() {
			return out
		}
	}
	if req == nil || req.Reasons.Global() || len(req.Configs)+len(req.Services) == 0 {
		return all()
	}
	for k := range req.Configs {
		// Kinds that feed the model are judged by req.Services below,
		// kinds only controllers read affect nothing, except for a type
		// that lists the kind (the Istio config types serve the configs
		// themselves).
		judged := k.Kind.FeedsModel() || k.Kind.ControllersOnly()
		listed := judged
		for _, t := range types {
			r, ok := t.Affects[k.Kind]
			listed = listed || ok
			if ok && reaches(r, pc, p, k, req) {
				out[t] = true
			}
		}
		if !listed {
			return all()
		}
	}
	if len(req.Services) > 0 {
		var v *scope.View
		if pc != nil {
			v = scope.NewForLookups(pc, p)
		}
		for sk := range req.Services {
			var s = (*model.Service)(nil)
			if pc != nil {
				s = pc.Service(sk.Hostname, sk.Namespace)
			}
			if s == nil || v.ServiceVisible(s) {
				return all() // removed (cannot tell who saw it) or visible
			}
		}
	}
	return out
}

// reaches reports whether a change of config k with reach r can affect
// proxy p.
func reaches(r xdstype.Reach, pc *push.PushContext, p *model.Proxy, k config.Key, req *push.Request) bool {
	router := p.Type == model.Router
	switch r {
	case xdstype.Everyone:
		return true
	case xdstype.Routers:
		return router
	case xdstype.Bound:
		return router || !req.GatewayOnly[k]
	case xdstype.Scoped:
		return pc == nil || k.Namespace == p.Namespace || k.Namespace == scope.RootNamespace(pc)
	}
	return true
}
