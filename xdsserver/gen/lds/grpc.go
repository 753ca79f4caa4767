package lds

import (
	"net/netip"
	"strconv"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"

	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/authz"
	"github.com/baremesh/baremesh/xdsserver/gen/rds"
	"github.com/baremesh/baremesh/xdsserver/gen/scope"
)

// grpcListeners answers a proxyless gRPC proxy. Each name is either a
// client target ("host:port", short names resolved in the proxy's
// namespace): an API listener of that exact name whose HTTP connection
// manager fetches RDS of the same name (filters: the router, preceded by
// the fault filter when the target's routes inject faults); or a
// server's "grpc/server?xds.resource.listening_address=IP:PORT" (grpc-go's
// default template) or "xds.istio.io/grpc/lds/inbound/IP:PORT" (the
// template of Istio's agent bootstrap): a
// listener on IP:PORT with one filter chain whose inline route answers
// every RPC locally (non_forwarding_action), as grpc-go requires. With no
// names (wildcard), every visible service port's "host:port".
func grpcListeners(v *scope.View, names []string) []gen.Resource {
	if len(names) == 0 {
		for _, svc := range v.Services {
			for _, p := range svc.Ports {
				names = append(names, gen.HostPort(svc.Hostname, p.Number))
			}
		}
	}
	out := make([]gen.Resource, 0, len(names))
	for _, name := range names {
		var l *listenerv3.Listener
		if addr, ok := gen.GRPCServerAddress(name); ok {
			l = grpcServerListener(v, name, addr)
		} else if _, _, ok := v.ResolveTarget(name); ok {
			l = grpcClientListener(v, name)
		}
		if l != nil {
			out = append(out, gen.Resource{Name: name, Resource: l})
		}
	}
	return out
}

func grpcClientListener(v *scope.View, name string) *listenerv3.Listener {
	filters := []*hcmv3.HttpFilter{routerFilter()}
	if rds.HasFault(v, name) {
		filters = []*hcmv3.HttpFilter{faultFilter(), routerFilter()}
	}
	h := hcmRDS(name, name, filters...)
	h.GetRds().ConfigSource = grpcRDSSource
	return &listenerv3.Listener{Name: name, ApiListener: &listenerv3.ApiListener{ApiListener: gen.MustAny(h)}}
}

// grpcRDSSource is a proxyless client's RDS config source: ADS without
// the initial_fetch_timeout gen.ADS sets for Envoy, which gRPC does not
// read and istiod's grpcgen does not set. Shared, never altered.
var grpcRDSSource = gen.ADSDefaultTimeout()

// grpcServerListener is nil when addr is no "IP:PORT". Its one filter
// chain follows Istio's proxyless conventions: mTLS (the certificate
// provider instance "default" of the server's bootstrap, a client
// certificate required) when the port's PeerAuthentication is STRICT,
// or PERMISSIVE on a workload labelled security.istio.io/tlsMode=istio
// (its clients use mTLS; grpc-go cannot serve both on one port); else
// plaintext. AuthorizationPolicies become HTTP RBAC filters before the
// router, which grpc-go's xDS server enforces.
func grpcServerListener(v *scope.View, name, addr string) *listenerv3.Listener {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return nil
	}
	port := uint32(ap.Port())
	rc := &routev3.RouteConfiguration{Name: "inbound|" + strconv.Itoa(int(port)), VirtualHosts: []*routev3.VirtualHost{{
		Name: "inbound|http|" + strconv.Itoa(int(port)), Domains: []string{"*"},
		Routes: []*routev3.Route{{
			Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
			Action: &routev3.Route_NonForwardingAction{NonForwardingAction: &routev3.NonForwardingAction{}},
		}},
	}}}
	h := hcmInline("inbound_"+strconv.Itoa(int(port)), rc)
	if pols := authz.For(v.Push, v.Proxy.Namespace, v.Proxy.Labels); !pols.Empty() {
		h.HttpFilters = append(pols.HTTPFilters(), h.HttpFilters...)
	}
	fc := &listenerv3.FilterChain{
		Name:    "inbound|" + strconv.Itoa(int(port)),
		Filters: []*listenerv3.Filter{hcmFilter(h)},
	}
	mode := scope.PeerAuthnFor(v.Push, v.Proxy.Namespace, v.Proxy.Labels).PortMode(port)
	if mode == scope.MTLSPermissive && v.Proxy.Labels["security.istio.io/tlsMode"] == "istio" {
		mode = scope.MTLSStrict
	}
	if mode == scope.MTLSStrict {
		fc.TransportSocket = &corev3.TransportSocket{Name: "envoy.transport_sockets.tls", ConfigType: &corev3.TransportSocket_TypedConfig{
			TypedConfig: gen.MustAny(&tlsv3.DownstreamTlsContext{RequireClientCertificate: gen.Bool(true), CommonTlsContext: gen.GRPCTLSContext(nil)}),
		}}
	}
	return &listenerv3.Listener{
		Name: name, Address: gen.SocketAddress(ap.Addr().String(), port),
		TrafficDirection: corev3.TrafficDirection_INBOUND,
		FilterChains:     []*listenerv3.FilterChain{fc},
	}
}
