package rds

import (
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/scope"
)

// gatewayRoutes builds a router's route configs. It indexes the
// VirtualServices by the gateway they bind to once per generation.
type gatewayRoutes struct {
	v       *scope.View
	servers map[string][]scope.GatewayServer // by route name
	vsByGW  map[string][]*config.Config
}

func newGatewayRoutes(v *scope.View) *gatewayRoutes {
	g := &gatewayRoutes{v: v, servers: map[string][]scope.GatewayServer{}, vsByGW: map[string][]*config.Config{}}
	ports, byPort := scope.GatewayServers(v.Push, v.Proxy)
	for _, p := range ports {
		for _, s := range byPort[p] {
			if s.IsHTTP() {
				g.servers[s.RouteName] = append(g.servers[s.RouteName], s)
			}
		}
	}
	vss := v.Push.Configs(config.VirtualService)
	for i := range vss {
		c := &vss[i]
		for _, gw := range c.Spec.(*networking.VirtualService).GetGateways() {
			if gw == "mesh" {
				continue
			}
			if !strings.Contains(gw, "/") {
				gw = c.Namespace + "/" + gw
			}
			g.vsByGW[gw] = append(g.vsByGW[gw], c)
		}
	}
	return g
}

// build makes the route config name: one virtual host per VirtualService
// host selected by a server of the config's servers, the routes of every
// VirtualService for that host merged in order (Istio merges them on
// gateways). Domains are the host and "host:*".
func (g *gatewayRoutes) build(name string) *routev3.RouteConfiguration {
	servers := g.servers[name]
	if len(servers) == 0 {
		return nil
	}
	rc := &routev3.RouteConfiguration{Name: name, ValidateClusters: noValidate}
	byHost := map[string]*routev3.VirtualHost{}
	used := map[string]bool{}
	for _, s := range servers {
		port := s.Server.GetPort().GetNumber()
		rb := routeBuilder{v: g.v, port: port, gateway: s.Gateway}
		for _, c := range g.vsByGW[s.Gateway] {
			vs := c.Spec.(*networking.VirtualService)
			if !scope.Exported(vs.GetExportTo(), c.Namespace, s.Namespace) {
				continue
			}
			var routes []*routev3.Route
			for _, h := range vs.GetHosts() {
				h = g.v.FQDN(h, c.Namespace)
				if !serverSelects(s, c.Namespace, h) {
					continue
				}
				if routes == nil {
					if routes = rb.vsRoutes(c); len(routes) == 0 {
						break // no HTTP routes for this port
					}
				}
				vh := byHost[h]
				if vh == nil {
					domains := make([]string, 0, 2)
					claim := func(d string) {
						if !used[d] {
							used[d] = true
							domains = append(domains, d)
						}
					}
					claim(h)
					if h != "*" {
						claim(h + ":*")
					}
					if len(domains) == 0 {
						continue
					}
					vh = &routev3.VirtualHost{Name: gen.HostPort(h, port), Domains: domains}
					byHost[h] = vh
					rc.VirtualHosts = append(rc.VirtualHosts, vh)
				}
				vh.Routes = append(vh.Routes, routes...)
			}
		}
	}
	return rc
}

func serverSelects(s scope.GatewayServer, vsNS, host string) bool {
	for _, sh := range s.Server.GetHosts() {
		if scope.ServerHostMatch(sh, s.Namespace, vsNS, host) {
			return true
		}
	}
	return false
}
