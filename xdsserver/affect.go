package xdsserver

import (
	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/core/push"
	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/scope"
)

// allTypes must not be altered.
var allTypes = map[string]bool{gen.ClusterType: true, gen.EndpointType: true, gen.ListenerType: true, gen.RouteType: true}

// affectedTypes says which types a full push can change for proxy p: a
// change it cannot see (a Gateway or a gateway-only VirtualService for a
// sidecar, a service outside its Sidecar scope or not exported to it, a
// Sidecar of another namespace) pushes nothing, and a change of one kind
// regenerates only the types that kind feeds. Anything it cannot judge
// (a removed service, the mesh config) affects everything.
func affectedTypes(pc *push.PushContext, p *gen.Proxy, req *push.Request) map[string]bool {
	if req == nil || req.Reasons["mesh"] > 0 || req.Reasons["initial"] > 0 || len(req.Configs)+len(req.Services) == 0 {
		return map[string]bool{gen.ClusterType: true, gen.EndpointType: true, gen.ListenerType: true, gen.RouteType: true}
	}
	out := map[string]bool{}
	add := func(ts ...string) {
		for _, t := range ts {
			out[t] = true
		}
	}
	router := p.Type == gen.Router
	for k := range req.Configs {
		switch k.Kind {
		case config.ServiceEntry, config.WorkloadEntry:
			// judged by req.Services below
		case config.Gateway:
			if router {
				add(gen.ListenerType, gen.RouteType, gen.ClusterType)
			}
		case config.VirtualService:
			switch {
			case router:
				add(gen.ListenerType, gen.RouteType, gen.ClusterType)
			case !req.GatewayOnly[k]:
				add(gen.ListenerType, gen.RouteType)
			}
		case config.DestinationRule:
			add(gen.ClusterType, gen.EndpointType, gen.RouteType)
		case config.Sidecar:
			if pc == nil || k.Namespace == p.Namespace || k.Namespace == scope.RootNamespace(pc) {
				add(gen.ClusterType, gen.EndpointType, gen.ListenerType, gen.RouteType)
			}
		case config.PeerAuthentication:
			add(gen.ListenerType, gen.ClusterType)
		case config.AuthorizationPolicy:
			add(gen.ListenerType)
		case config.WorkloadGroup:
			// read by auto-registration, not by generators
		default:
			add(gen.ClusterType, gen.EndpointType, gen.ListenerType, gen.RouteType)
		}
	}
	if len(req.Services) > 0 {
		var v *scope.View
		if pc != nil {
			v = scope.New(pc, p)
		}
		for sk := range req.Services {
			var s = (*model.Service)(nil)
			if pc != nil {
				s = pc.Service(sk.Hostname, sk.Namespace)
			}
			if s == nil || v.ServiceVisible(s) {
				// removed (cannot tell who saw it) or visible
				add(gen.ClusterType, gen.EndpointType, gen.ListenerType, gen.RouteType)
				break
			}
		}
	}
	return out
}
