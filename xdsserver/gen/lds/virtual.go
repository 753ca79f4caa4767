package lds

import (
	"slices"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	meshv1alpha1 "istio.io/api/mesh/v1alpha1"

	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/authz"
	"github.com/baremesh/baremesh/xdsserver/gen/scope"
)

// virtualOutbound is the listener iptables sends outbound traffic to: it
// hands each connection to the listener of its original destination, and
// sends what none claims to the PassthroughCluster (BlackHoleCluster
// under REGISTRY_ONLY).
func virtualOutbound(v *scope.View) *listenerv3.Listener {
	cluster := gen.PassthroughCluster
	if m := v.Push.Mesh; m != nil && m.GetOutboundTrafficPolicy().GetMode() == meshv1alpha1.MeshConfig_OutboundTrafficPolicy_REGISTRY_ONLY {
		cluster = gen.BlackHoleCluster
	}
	return &listenerv3.Listener{
		Name: gen.VirtualOutboundListener, Address: gen.SocketAddress("0.0.0.0", gen.VirtualOutboundPort),
		UseOriginalDst: gen.Bool(true), TrafficDirection: corev3.TrafficDirection_OUTBOUND,
		FilterChains: []*listenerv3.FilterChain{{Name: "PassthroughFilterChain", Filters: []*listenerv3.Filter{tcpProxy(cluster, cluster)}}},
	}
}

// virtualInbound is the listener iptables sends inbound traffic to: one
// filter chain per port the workload serves (by destination port; HTTP
// ports through an HTTP connection manager with an inline route to
// "inbound|PORT||", others through tcp_proxy), the rest passed through
// to the original destination from 127.0.0.6. Auto-detected inbound
// ports are served as TCP. Each port's chains follow its
// PeerAuthentication mode (inboundtls.go); the TLS inspector tells TLS
// from plaintext. AuthorizationPolicies become RBAC filters: HTTP RBAC
// before the router, network RBAC before tcp_proxy (authz).
func virtualInbound(v *scope.View) *listenerv3.Listener {
	l := &listenerv3.Listener{
		Name: gen.VirtualInboundListener, Address: gen.SocketAddress("0.0.0.0", gen.VirtualInboundPort),
		UseOriginalDst: gen.Bool(true), TrafficDirection: corev3.TrafficDirection_INBOUND,
		ListenerFilters: []*listenerv3.ListenerFilter{originalDst(), tlsInspector()},
		DefaultFilterChain: &listenerv3.FilterChain{Name: "InboundPassthroughFilterChain", Filters: []*listenerv3.Filter{
			tcpProxy(gen.InboundPassthroughCluster, gen.InboundPassthroughCluster),
		}},
	}
	pols := authz.For(v.Push, v.Proxy.Namespace, v.Proxy.Labels)
	var httpRBAC []*hcmv3.HttpFilter
	var tcpRBAC []*listenerv3.Filter
	if !pols.Empty() {
		httpRBAC, tcpRBAC = pols.HTTPFilters(), pols.NetworkFilters()
	}
	for _, inst := range scope.Inbound(v.Push, v.Proxy) {
		cluster := gen.ClusterName(gen.Inbound, inst.TargetPort, "", "")
		stat := "inbound_0.0.0.0_" + gen.PortName(inst.TargetPort)
		http := inst.Port.Protocol.IsHTTP()
		filters := func() []*listenerv3.Filter {
			if http {
				h := hcmInline(stat, inboundRoute(cluster, inst))
				if len(httpRBAC) > 0 {
					h.HttpFilters = append(slices.Clip(httpRBAC), h.HttpFilters...)
				}
				return []*listenerv3.Filter{hcmFilter(h)}
			}
			return append(slices.Clip(tcpRBAC), tcpProxy(stat, cluster))
		}
		l.FilterChains = append(l.FilterChains, inboundFilterChains(v, cluster, inst.TargetPort, http, filters)...)
	}
	return l
}

func inboundRoute(cluster string, inst scope.Instance) *routev3.RouteConfiguration {
	return &routev3.RouteConfiguration{Name: cluster, ValidateClusters: gen.Bool(false), VirtualHosts: []*routev3.VirtualHost{{
		Name: "inbound|http|" + gen.PortName(inst.Port.Number), Domains: []string{"*"},
		Routes: []*routev3.Route{{
			Name:  "default",
			Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
			Action: &routev3.Route_Route{Route: &routev3.RouteAction{
				ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: cluster}, Timeout: gen.Duration(0),
			}},
		}},
	}}}
}
