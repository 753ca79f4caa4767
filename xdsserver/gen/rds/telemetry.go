package rds

import (
	"strconv"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/baremesh/baremesh/xdsserver/gen"
)

// decorate names the spans of rc's routes as istiod's GetRouteOperation
// does for a route to one cluster: "HOST:PORT" of the cluster and the
// match's path ("/*" for any, PREFIX* for a prefix, the path or regex).
// Only tracing reads decorators. Routes to several clusters (istiod names
// those after their VirtualService), redirects, direct responses and the
// allow_any route keep none. Routes are built per generation (a router's
// are shared between its route configs with the same value), so setting
// them here is safe.
func decorate(rc *routev3.RouteConfiguration) {
	for _, vh := range rc.GetVirtualHosts() {
		for _, r := range vh.GetRoutes() {
			if r.Decorator != nil {
				continue
			}
			k, ok := gen.ParseClusterName(r.GetRoute().GetCluster())
			if !ok || k.Direction != gen.Outbound {
				continue
			}
			path := "/*"
			switch m := r.GetMatch(); {
			case m.GetPrefix() != "":
				path = m.GetPrefix() + "*"
			case m.GetPath() != "":
				path = m.GetPath()
			case m.GetSafeRegex() != nil:
				path = m.GetSafeRegex().GetRegex()
			}
			r.Decorator = &routev3.Decorator{Operation: k.Host + ":" + strconv.Itoa(int(k.Port)) + path}
		}
	}
}
