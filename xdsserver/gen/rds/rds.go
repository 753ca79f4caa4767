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
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/baremesh/baremesh/core/model"
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
	var shared map[servicePort]*routev3.VirtualHost
	if in.Proxy.Type != model.Router && !in.Proxy.Proxyless && portAndHostNames(names) {
		shared = map[servicePort]*routev3.VirtualHost{}
	}
	out := make([]gen.Resource, 0, len(names))
	for _, name := range names {
		var rc *routev3.RouteConfiguration
		switch {
		case in.Proxy.Proxyless:
			rc = grpcRoute(v, name)
		case in.Proxy.Type == model.Router:
			if gw == nil {
				gw = newGatewayRoutes(v)
			}
			rc = gw.build(name)
		default:
			rc = sidecarRoute(v, name, shared)
		}
		if rc != nil {
			decorate(rc) // telemetry.go (istiod's grpcgen decorates too; gRPC ignores it)
			out = append(out, gen.Resource{Name: name, Resource: rc})
		}
	}
	return out, nil
}

// portAndHostNames reports whether names has both sidecar kinds, "PORT"
// and "host:port": only then can a virtual host be in two configs.
func portAndHostNames(names []string) bool {
	port, host := false, false
	for _, n := range names {
		if _, ok := parsePort(n); ok {
			port = true
		} else {
			host = true
		}
		if port && host {
			return true
		}
	}
	return false
}

// newView is the proxy's view; a router's routes list no services.
func newView(in gen.Input) *scope.View {
	if in.Proxy.Type == model.Router && !in.Proxy.Proxyless {
		return scope.NewForLookups(in.Push, in.Proxy)
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
	case v.Proxy.Type == model.Router:
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
// an address). shared is the generation's (see vhostBuilder).
func sidecarRoute(v *scope.View, name string, shared map[servicePort]*routev3.VirtualHost) *routev3.RouteConfiguration {
	if port, ok := parsePort(name); ok {
		return portRoute(v, name, port, shared)
	}
	i := strings.LastIndexByte(name, ':')
	if i < 0 {
		return nil
	}
	port, ok := parsePort(name[i+1:])
	if !ok {
		return nil
	}
	svc := v.ServiceFor(name[:i])
	if svc == nil {
		return nil
	}
	p, found := svc.Port(port)
	if !found || scope.ListenerProtocol(p) != scope.ListenAuto || scope.ServiceAddress(v.Proxy, svc) == "" {
		return nil
	}
	vb := newVhostBuilder(v, port, 1, 0, shared)
	vb.service(svc, true)
	// The listener of this one service port has no other host: its
	// virtual host takes every domain, as istiod's
	// getVirtualHostsForSniffedServicePort. A copy where the host may be
	// shared with a "PORT" config of this generation (shared set).
	for i, vh := range vb.hosts {
		if shared == nil {
			vh.Domains = anyDomain
			continue
		}
		vb.hosts[i] = &routev3.VirtualHost{Name: vh.Name, Domains: anyDomain, Routes: vh.Routes, IncludeRequestAttemptCount: vh.IncludeRequestAttemptCount}
	}
	return sidecarConfig(name, vb.hosts)
}

// parsePort parses a decimal uint32 as strconv.ParseUint(s, 10, 32)
// would, without building an error for the names that are none (most
// sidecar route names are "host:port").
func parsePort(s string) (uint32, bool) {
	if s == "" {
		return 0, false
	}
	var n uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		if n = n*10 + uint64(c-'0'); n > 1<<32-1 {
			return 0, false
		}
	}
	return uint32(n), true
}

// portRoute is the route config "PORT" of the listener "0.0.0.0_PORT":
// a virtual host for every visible service whose port is HTTP or
// auto-detected, with or without an address, as istiod lists them
// (port.Protocol.IsHTTP() or sniffed); then VirtualService-only hosts
// and the catch-all. A first pass counts the hosts and their domains so
// that the list and the domain index are allocated once.
func portRoute(v *scope.View, name string, port uint32, shared map[servicePort]*routev3.VirtualHost) *routev3.RouteConfiguration {
	hosts, names := 0, 0
	for _, svc := range v.Services {
		if servedOn(v, svc, port) != notServed {
			hosts++
			// The hostname and the addresses; short names are few.
			names += 1 + len(scope.Addresses(v.Proxy, svc))
		}
	}
	vb := newVhostBuilder(v, port, hosts+1, names+1, shared)
	for _, svc := range v.Services {
		switch servedOn(v, svc, port) {
		case servedHTTP:
			vb.service(svc, false)
		case servedAuto:
			// A service with an address has its own "host:port" config
			// too (sidecarRoute), with the same virtual host.
			vb.service(svc, scope.ServiceAddress(v.Proxy, svc) != "")
		}
	}
	vb.vsOnlyHosts()
	vb.fallback()
	return sidecarConfig(name, vb.hosts)
}

// sidecarConfig is a sidecar's (or gateway's) route config as istiod
// sets it beside its hosts: the port of a Host header ignored in
// matching (domains list names without ports), direct responses up to
// 1 MiB (Envoy's default: 4 KiB), clusters not validated.
func sidecarConfig(name string, hosts []*routev3.VirtualHost) *routev3.RouteConfiguration {
	return &routev3.RouteConfiguration{Name: name, VirtualHosts: hosts, ValidateClusters: noValidate,
		IgnorePortInHostMatching: true, MaxDirectResponseBodySizeBytes: maxDirectResponse}
}

// Shared, never altered.
var (
	anyDomain         = []string{"*"}
	maxDirectResponse = gen.U32(1 << 20)
)

// How a sidecar's "PORT" route config lists a service: not, for its
// HTTP port, or for its auto-detected one.
const (
	notServed = iota
	servedHTTP
	servedAuto
)

// servedOn says how a sidecar's "PORT" route config lists svc: a
// Sidecar egress listener bound to the port imports only its own hosts.
func servedOn(v *scope.View, svc *model.Service, port uint32) int {
	p, ok := svc.Port(port)
	if !ok || !v.ListenerImports(svc, port) {
		return notServed
	}
	switch scope.ListenerProtocol(p) {
	case scope.ListenHTTP:
		return servedHTTP
	case scope.ListenAuto:
		return servedAuto
	}
	return notServed
}
