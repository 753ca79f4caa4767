package lds

import (
	"slices"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/scope"
)

// virtualOutbound is the listener iptables sends outbound traffic to: it
// hands each connection to the listener of its original destination, and
// sends what none claims to the PassthroughCluster (BlackHoleCluster
// under REGISTRY_ONLY); connections to 15001 itself to the
// BlackHoleCluster. Chains named as istiod names them.
func virtualOutbound(v *scope.View) *listenerv3.Listener {
	cluster := outboundCatchAll(v)
	l := &listenerv3.Listener{
		Name:           gen.VirtualOutboundListener,
		UseOriginalDst: gen.Bool(true), TrafficDirection: corev3.TrafficDirection_OUTBOUND,
		MaxConnectionsToAcceptPerSocketEvent: acceptPerEvent,
		FilterChains: []*listenerv3.FilterChain{
			// Connections to 15001 itself would loop back into it.
			{Name: gen.VirtualOutboundListener + "-blackhole", FilterChainMatch: &listenerv3.FilterChainMatch{DestinationPort: gen.U32(gen.VirtualOutboundPort)},
				Filters: []*listenerv3.Filter{tcpProxy(gen.BlackHoleCluster, gen.BlackHoleCluster, nil)}},
			{Name: gen.VirtualOutboundListener + "-catchall-tcp", Filters: []*listenerv3.Filter{tcpProxy(cluster, cluster, gen.NodeIdleTimeout(v.Proxy))}},
		},
	}
	setAddresses(l, v.Proxy, gen.VirtualOutboundPort)
	if v.Proxy.InterceptionMode == "TPROXY" {
		l.Transparent = gen.Bool(true)
	}
	return l
}

// outboundCatchAll is the cluster for outbound traffic to no known
// service: PassthroughCluster, BlackHoleCluster under REGISTRY_ONLY (the
// proxy's Sidecar's, else the mesh's).
func outboundCatchAll(v *scope.View) string {
	if v.RegistryOnly() {
		return gen.BlackHoleCluster
	}
	return gen.PassthroughCluster
}

// virtualInbound is the listener iptables sends inbound traffic to, built
// as istiod builds it:
//   - a chain for connections to 15006 itself, to the BlackHoleCluster
//     (no loop);
//   - catch-all chains for every port no service declares (and one set
//     per port-level PeerAuthentication port not declared either), under
//     the workload's PeerAuthentication mode like a declared port: STRICT
//     takes only mTLS with a client certificate, PERMISSIVE tells mTLS,
//     other TLS and plaintext apart, DISABLE takes plaintext; HTTP (found
//     by the HTTP inspector, or an Istio HTTP ALPN over mTLS) goes through
//     a connection manager with the HTTP RBAC filters to
//     InboundPassthroughCluster, the rest through the network RBAC
//     filters and tcp_proxy. So a policy covers undeclared ports too (an
//     agent capturing every inbound port, inboundPorts "*", sends them
//     here); there is no default chain: what matches nothing is closed;
//   - one set per port the workload serves, named "0.0.0.0_PORT" (by
//     destination port; HTTP ports through a connection manager with an
//     inline route to "inbound|PORT||", TCP ones through tcp_proxy,
//     auto-detected ones sniffed as the catch-all is).
//
// The TLS and HTTP inspectors run only for the ports whose chains need
// them (istiod's populateListenerFilters).
func virtualInbound(v *scope.View) *listenerv3.Listener {
	l := &listenerv3.Listener{
		Name: gen.VirtualInboundListener, TrafficDirection: corev3.TrafficDirection_INBOUND,
		ContinueOnListenerFiltersTimeout: true, MaxConnectionsToAcceptPerSocketEvent: acceptPerEvent,
	}
	setAddresses(l, v.Proxy, gen.VirtualInboundPort)
	if m := v.Push.Mesh; m != nil && m.GetProtocolDetectionTimeout() != nil {
		l.ListenerFiltersTimeout = m.GetProtocolDetectionTimeout()
	}
	tproxy := v.Proxy.InterceptionMode == "TPROXY"
	if tproxy {
		l.Transparent = gen.Bool(true)
	}
	httpRBAC, tcpRBAC := securityFilters(v, false) // authn.go
	pa := scope.PeerAuthnFor(v.Push, v.Proxy.Namespace, v.Proxy.Labels)
	inst := scope.Inbound(v.Push, v.Proxy)

	l.FilterChains = append(l.FilterChains, inboundBlackhole())
	declared := make(map[uint32]bool, len(inst))
	for _, in := range inst {
		declared[in.TargetPort] = true
	}
	pass := &passthroughChains{v: v, httpRBAC: httpRBAC, tcpRBAC: tcpRBAC}
	l.FilterChains = append(l.FilterChains, pass.build(0, pa.Mode)...)
	ports := make([]uint32, 0, len(pa.Ports))
	for port := range pa.Ports {
		if !declared[port] {
			ports = append(ports, port)
		}
	}
	slices.Sort(ports)
	for _, port := range ports {
		l.FilterChains = append(l.FilterChains, pass.build(port, pa.Ports[port])...)
	}

	opts := newHCMOpts(v, inboundHTTP)
	idle := gen.NodeIdleTimeout(v.Proxy)
	for _, in := range inst {
		cluster := gen.ClusterName(gen.Inbound, in.TargetPort, "", "")
		name := gen.ListenerName(ingressBind(v.Proxy, in), in.TargetPort)
		stat := "inbound_" + name
		telemetryHost := in.TelemetryHost(v.Proxy.Namespace)
		o := opts
		o.http2 = in.Port.Protocol.IsHTTP2()
		httpFilters := func() []*listenerv3.Filter {
			h := hcmInline(stat, inboundRoute(v, cluster, in.Port.Number, in.Port.Protocol.IsGRPC()))
			decorate(h.GetRouteConfig(), telemetryHost, in.Port.Number)
			h.HttpFilters = sidecarHTTPFilters
			o.apply(h)
			if len(httpRBAC) > 0 {
				h.HttpFilters = append(slices.Clip(httpRBAC), h.HttpFilters...)
			}
			return []*listenerv3.Filter{hcmFilter(h)}
		}
		tcpFilters := func() []*listenerv3.Filter {
			stat := cluster
			if pat := v.Push.Mesh.GetInboundClusterStatName(); pat != "" && in.Sidecar != nil {
				stat = gen.InboundStatName(pat, telemetryHost, v.Proxy.Namespace, false, in.Port.Number, in.Port.Name)
			} else if pat != "" && in.Service != nil {
				s := in.Service
				stat = gen.InboundStatName(pat, s.Hostname, s.Namespace, s.Source.Kind == "", in.Port.Number, in.Port.Name)
			}
			return append(slices.Clip(tcpRBAC), tcpProxy(stat, cluster, idle))
		}
		mode := pa.PortMode(in.TargetPort)
		first := len(l.FilterChains)
		switch scope.ListenerProtocol(in.Port) {
		case scope.ListenAuto:
			// Sniffed as istiod sniffs an undeclared port: HTTP (by the
			// HTTP inspector, or an Istio HTTP ALPN) to a connection
			// manager, the rest to tcp_proxy.
			for _, m := range passthroughMatches(mode) {
				fc := &listenerv3.FilterChain{Name: name, FilterChainMatch: &listenerv3.FilterChainMatch{
					DestinationPort: gen.U32(in.TargetPort), TransportProtocol: m.transport, ApplicationProtocols: m.alpn,
				}}
				if m.http {
					fc.Filters = httpFilters()
				} else {
					fc.Filters = tcpFilters()
				}
				if m.tls {
					fc.TransportSocket = inboundTLS(v, m.http)
				}
				l.FilterChains = append(l.FilterChains, fc)
			}
		case scope.ListenHTTP:
			l.FilterChains = append(l.FilterChains, inboundFilterChains(v, name, in.TargetPort, mode, true, httpFilters)...)
		default:
			l.FilterChains = append(l.FilterChains, inboundFilterChains(v, name, in.TargetPort, mode, false, tcpFilters)...)
		}
		if in.Sidecar != nil {
			// Marked with the Sidecar they come from, as istiod marks them.
			md := gen.ConfigMetadata(gen.ConfigPath("sidecar", v.Proxy.Namespace, in.Sidecar.Name))
			for _, fc := range l.FilterChains[first:] {
				fc.Metadata = md
			}
		}
	}
	l.ListenerFilters = inboundListenerFilters(l.FilterChains, tproxy)
	inboundMX(v, l)
	return l
}

// ingressBind is the address an inbound chain is named after: a Sidecar
// ingress listener's is the proxy's first global unicast IP (istiod's
// getSidecarInboundBindIPs; a wildcard when it has none), a service
// port's the IPv4 wildcard.
func ingressBind(p *model.Proxy, in scope.Instance) string {
	if in.Sidecar != nil {
		if ip := scope.GlobalUnicastIP(p.IPs); ip != "" {
			return ip
		}
		if v4, v6 := p.IPFamilies(); v6 && !v4 {
			return wildcardIPv6
		}
	}
	return wildcardIPv4
}

// inboundBlackhole takes connections to the inbound listener's own port.
func inboundBlackhole() *listenerv3.FilterChain {
	return &listenerv3.FilterChain{
		Name:             gen.VirtualInboundListener + "-blackhole",
		FilterChainMatch: &listenerv3.FilterChainMatch{DestinationPort: gen.U32(gen.VirtualInboundPort)},
		Filters:          []*listenerv3.Filter{tcpProxy(gen.BlackHoleCluster, gen.BlackHoleCluster, nil)},
	}
}

// passthroughChains builds virtualInbound's catch-all chains. Their
// HTTP chains share one filter list, and so do their TCP chains (made on
// first use; outputs are only marshalled, never altered).
type passthroughChains struct {
	v        *scope.View
	httpRBAC []*hcmv3.HttpFilter
	tcpRBAC  []*listenerv3.Filter
	http     []*listenerv3.Filter
	tcp      []*listenerv3.Filter
}

// build is the catch-all chains for port (0: any port) in mode.
func (c *passthroughChains) build(port uint32, mode scope.MTLSMode) []*listenerv3.FilterChain {
	var out []*listenerv3.FilterChain
	for _, m := range passthroughMatches(mode) {
		fc := &listenerv3.FilterChain{FilterChainMatch: &listenerv3.FilterChainMatch{
			TransportProtocol: m.transport, ApplicationProtocols: m.alpn,
		}}
		if port != 0 {
			fc.FilterChainMatch.DestinationPort = gen.U32(port)
		}
		if m.http {
			if c.http == nil {
				h := hcmInline(gen.InboundPassthroughCluster, inboundRoute(c.v, gen.InboundPassthroughCluster, 0, false))
				decorate(h.GetRouteConfig(), "", 0)
				h.HttpFilters = sidecarHTTPFilters
				newHCMOpts(c.v, inboundHTTP).apply(h)
				if len(c.httpRBAC) > 0 {
					h.HttpFilters = append(slices.Clip(c.httpRBAC), h.HttpFilters...)
				}
				c.http = []*listenerv3.Filter{hcmFilter(h)}
			}
			fc.Name, fc.Filters = gen.VirtualInboundListener+"-catchall-http", c.http
		} else {
			if c.tcp == nil {
				stat := gen.InboundPassthroughCluster
				if pat := c.v.Push.Mesh.GetInboundClusterStatName(); pat != "" {
					stat = gen.InboundStatName(pat, "", "", false, 0, gen.VirtualInboundListener)
				}
				c.tcp = append(slices.Clip(c.tcpRBAC), tcpProxy(stat, gen.InboundPassthroughCluster, gen.NodeIdleTimeout(c.v.Proxy)))
			}
			fc.Name, fc.Filters = gen.VirtualInboundListener, c.tcp
		}
		if m.tls {
			fc.TransportSocket = inboundTLS(c.v, m.http)
		}
		out = append(out, fc)
	}
	return out
}

// passthroughMatch is one catch-all chain's match.
type passthroughMatch struct {
	transport string
	alpn      []string
	http      bool // an HTTP connection manager, else tcp_proxy
	tls       bool // terminate Istio mTLS
}

// ALPNs of istiod's catch-all chains.
var (
	mtlsHTTPALPNs      = []string{"istio-http/1.0", "istio-http/1.1", "istio-h2"}
	mtlsTCPALPNs       = []string{"istio-peer-exchange", "istio"}
	plaintextHTTPALPNs = []string{"http/1.1", "h2c"}
)

// passthroughMatches are istiod's catch-all matches for a mode (its
// filter chain match options for an auto-detected port).
func passthroughMatches(mode scope.MTLSMode) []passthroughMatch {
	switch mode {
	case scope.MTLSStrict:
		return []passthroughMatch{
			{transport: "tls", alpn: mtlsHTTPALPNs, http: true, tls: true},
			{transport: "tls", tls: true},
		}
	case scope.MTLSDisable:
		return []passthroughMatch{
			{transport: "raw_buffer", alpn: plaintextHTTPALPNs, http: true},
			{transport: "raw_buffer"},
		}
	}
	return []passthroughMatch{
		{transport: "tls", alpn: mtlsHTTPALPNs, http: true, tls: true},
		{transport: "raw_buffer", alpn: plaintextHTTPALPNs, http: true},
		{transport: "tls", alpn: mtlsTCPALPNs, tls: true},
		{transport: "raw_buffer"},
		{transport: "tls"},
	}
}

// inboundRoute is the inline route config of an inbound connection
// manager: everything to cluster, without timeouts, retried twice on a
// reset before the request reached the app (never on gRPC ports, whose
// streams it would break), as istiod's BuildDefaultHTTPInboundRoute. port is the
// service port (0 for the catch-all).
func inboundRoute(v *scope.View, cluster string, port uint32, grpc bool) *routev3.RouteConfiguration {
	var retry *routev3.RetryPolicy
	if !grpc {
		retry = inboundRetry(v)
	}
	return &routev3.RouteConfiguration{Name: cluster, ValidateClusters: gen.Bool(false), VirtualHosts: []*routev3.VirtualHost{{
		Name: "inbound|http|" + gen.PortName(port), Domains: []string{"*"},
		Routes: []*routev3.Route{{
			Name:  "default",
			Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
			Action: &routev3.Route_Route{Route: &routev3.RouteAction{
				ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: cluster}, Timeout: gen.Duration(0),
				MaxStreamDuration: &routev3.RouteAction_MaxStreamDuration{MaxStreamDuration: gen.Duration(0), GrpcTimeoutHeaderMax: gen.Duration(0)},
				RetryPolicy:       retry,
			}},
		}},
	}}}
}

// defaultInboundRetry is istiod's default inbound retry policy, shared and
// never altered.
var defaultInboundRetry = &routev3.RetryPolicy{NumRetries: wrapperspb.UInt32(2), RetryOn: "reset-before-request"}

// inboundRetry is istiod's default inbound retry policy. (Newer meshes
// tune it with defaultInboundHttpRetryPolicy; istio.io/api v1.31 has no
// such field, so neither does our mesh config.)
func inboundRetry(*scope.View) *routev3.RetryPolicy { return defaultInboundRetry }
