// Package rds generates RouteConfigurations (RDS): a sidecar's per-port
// outbound route configs ("80") and per-service ones for auto-detected
// ports ("host:port"), a gateway's "http.PORT" and "https.PORT.NAME.GW.NS"
// configs, and a proxyless gRPC client's config named after its target.
// VirtualService HTTP routes become Envoy routes here (matches, weighted
// destinations, retries, timeouts, faults, mirrors, rewrites, redirects,
// direct responses, header operations) and DestinationRule consistent
// hashing becomes route hash policies.
//
// It imports core and xdsserver/gen only.
package rds

import (
	"fmt"
	"strconv"
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/scope"
)

var _ gen.Generator = Generate

// Generate builds the route configurations named in in.Names; with no
// names, every one the proxy's listeners refer to (RouteNames). Names
// that mean nothing for the proxy are left out.
func Generate(in gen.Input) ([]gen.Resource, error) {
	if in.Push == nil || in.Proxy == nil {
		return nil, fmt.Errorf("rds: missing push context or proxy")
	}
	v := newView(in)
	names := in.Names
	if len(names) == 0 {
		names = RouteNames(v)
	}
	var gw *gatewayRoutes
	out := make([]gen.Resource, 0, len(names))
	for _, name := range names {
		var rc *routev3.RouteConfiguration
		switch {
		case in.Proxy.Proxyless:
			rc = grpcRoute(v, name)
		case in.Proxy.Type == gen.Router:
			if gw == nil {
				gw = newGatewayRoutes(v)
			}
			rc = gw.build(name)
		default:
			rc = sidecarRoute(v, name)
		}
		if rc != nil {
			out = append(out, gen.Resource{Name: name, Resource: rc})
		}
	}
	return out, nil
}

// newView is the proxy's view; a router's routes list no services.
func newView(in gen.Input) *scope.View {
	if in.Proxy.Type == gen.Router && !in.Proxy.Proxyless {
		return scope.NewRouter(in.Push, in.Proxy)
	}
	return scope.New(in.Push, in.Proxy)
}

// RouteNames lists the route configurations the proxy's listeners refer
// to, as LDS names them: for sidecars the port of every visible HTTP
// service port and of auto-detected ports of services without an address
// (for this proxy), "host:port" for auto-detected ports with one; for
// gateways the route names of their HTTP servers. Proxyless clients
// name their own.
func RouteNames(v *scope.View) []string {
	seen := map[string]bool{}
	var out []string
	add := func(n string) {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	switch {
	case v.Proxy.Proxyless:
	case v.Proxy.Type == gen.Router:
		ports, servers := scope.GatewayServers(v.Push, v.Proxy)
		for _, p := range ports {
			for _, s := range servers[p] {
				if s.IsHTTP() {
					add(s.RouteName)
				}
			}
		}
	default:
		for _, svc := range v.Services {
			for _, p := range svc.Ports {
				switch scope.ListenerProtocol(p) {
				case scope.ListenHTTP:
					add(gen.PortName(p.Number))
				case scope.ListenAuto:
					if scope.ServiceAddress(v.Proxy, svc) != "" {
						add(gen.HostPort(svc.Hostname, p.Number))
					} else {
						add(gen.PortName(p.Number))
					}
				}
			}
		}
	}
	return out
}

// sidecarRoute builds "PORT" (every HTTP or auto-detected service port
// on that port) or "host:port" (one auto-detected port of a service with
// an address).
func sidecarRoute(v *scope.View, name string) *routev3.RouteConfiguration {
	if port, err := strconv.ParseUint(name, 10, 32); err == nil {
		return portRoute(v, name, uint32(port))
	}
	i := strings.LastIndexByte(name, ':')
	if i < 0 {
		return nil
	}
	port, err := strconv.ParseUint(name[i+1:], 10, 32)
	if err != nil {
		return nil
	}
	svc := v.ServiceFor(name[:i])
	if svc == nil {
		return nil
	}
	p, ok := svc.Port(uint32(port))
	if !ok || scope.ListenerProtocol(p) != scope.ListenAuto || scope.ServiceAddress(v.Proxy, svc) == "" {
		return nil
	}
	vb := newVhostBuilder(v, uint32(port))
	vb.service(svc)
	return &routev3.RouteConfiguration{Name: name, VirtualHosts: vb.hosts, ValidateClusters: noValidate}
}

// portRoute is the route config "PORT" of the listener "0.0.0.0_PORT":
// a virtual host for every visible service whose port is HTTP or
// auto-detected, with or without an address, as istiod lists them
// (port.Protocol.IsHTTP() or sniffed); then VirtualService-only hosts
// and the catch-all.
func portRoute(v *scope.View, name string, port uint32) *routev3.RouteConfiguration {
	vb := newVhostBuilder(v, port)
	for _, svc := range v.Services {
		if p, ok := svc.Port(port); ok {
			if lp := scope.ListenerProtocol(p); lp == scope.ListenHTTP || lp == scope.ListenAuto {
				vb.service(svc)
			}
		}
	}
	vb.vsOnlyHosts()
	vb.fallback()
	return &routev3.RouteConfiguration{Name: name, VirtualHosts: vb.hosts, ValidateClusters: noValidate}
}
