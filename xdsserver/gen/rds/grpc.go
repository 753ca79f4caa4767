package rds

import (
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/scope"
)

// grpcRoute builds a proxyless client's route config, named as its
// listener ("host:port" as dialed): one virtual host whose domains are
// that name and the service's "host:port", with the VirtualService's
// routes or the default route. Nil when the name is no visible service
// port.
func grpcRoute(v *scope.View, name string) *routev3.RouteConfiguration {
	svc, p, ok := v.ResolveTarget(name)
	if !ok {
		return nil
	}
	rb := routeBuilder{v: v, port: p.Number, gateway: "mesh", proxyless: true}
	var routes []*routev3.Route
	if vs := v.VirtualServiceFor(svc.Hostname); vs != nil {
		routes = rb.vsRoutes(vs, nil)
	}
	if len(routes) == 0 { // no VirtualService, or none of its HTTP routes is for this port (as vhostBuilder.service)
		routes = []*routev3.Route{rb.defaultRoute(&forwardRoute{}, gen.ClusterName(gen.Outbound, p.Number, "", svc.Hostname), svc.Hostname)}
	}
	domains := []string{name}
	if hp := gen.HostPort(svc.Hostname, p.Number); hp != name {
		domains = append(domains, hp)
	}
	return &routev3.RouteConfiguration{Name: name, VirtualHosts: []*routev3.VirtualHost{{Name: name, Domains: domains, Routes: routes}}}
}

// HasFault reports whether the route config for a proxyless target uses
// fault injection, so its listener must carry the fault filter.
func HasFault(v *scope.View, name string) bool {
	svc, p, ok := v.ResolveTarget(name)
	if !ok {
		return false
	}
	vs := v.VirtualServiceFor(svc.Hostname)
	if vs == nil {
		return false
	}
	rb := routeBuilder{v: v, port: p.Number, gateway: "mesh", proxyless: true}
	for _, r := range rb.vsRoutes(vs, nil) {
		if r.GetTypedPerFilterConfig()[FaultFilterName] != nil {
			return true
		}
	}
	return false
}
