package rds

import (
	"strconv"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/baremesh/baremesh/core/config"
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
			r.Decorator = &routev3.Decorator{Operation: k.Host + ":" + strconv.Itoa(int(k.Port)) + matchPath(r.GetMatch())}
		}
	}
}

// vsTelemetry marks the routes of VirtualService c as istiod does: the
// resource in filter_metadata.istio.config (one value shared by its
// routes), and, for a route to several clusters (or a redirect or a
// direct response), the decorator "VS_NAME:PORT" and the match's path.
func vsTelemetry(c *config.Config, port uint32, routes []*routev3.Route) {
	if len(routes) == 0 {
		return
	}
	md := gen.ConfigMetadata(gen.ConfigPath("virtual-service", c.Namespace, c.Name))
	for _, r := range routes {
		r.Metadata = md
		if _, ok := gen.ParseClusterName(r.GetRoute().GetCluster()); ok {
			continue // decorate names it after its cluster
		}
		r.Decorator = &routev3.Decorator{Operation: c.Name + ":" + strconv.Itoa(int(port)) + matchPath(r.GetMatch())}
	}
}

func matchPath(m *routev3.RouteMatch) string {
	switch {
	case m.GetPrefix() != "":
		return m.GetPrefix() + "*"
	case m.GetPath() != "":
		return m.GetPath()
	case m.GetSafeRegex() != nil:
		return m.GetSafeRegex().GetRegex()
	}
	return "/*"
}
