package cds

import (
	"math"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/scope"
)

// inboundBindAddress is the source address Istio gives connections to
// the local application, so capture rules can exempt them.
const inboundBindAddress = "127.0.0.6"

// passthrough is PassthroughCluster: HTTP routed to it (an HTTP port's
// allow-any route) goes upstream in the protocol it came in, and idle
// upstream connections close after 5 minutes, as istiod's
// passthroughHttpProtocolOptions.
func passthrough() *clusterv3.Cluster {
	c := originalDst(gen.PassthroughCluster)
	c.TypedExtensionProtocolOptions = passthroughHTTPOptions
	return c
}

func originalDst(name string) *clusterv3.Cluster {
	return &clusterv3.Cluster{
		Name: name, ConnectTimeout: gen.Duration(10 * time.Second),
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_ORIGINAL_DST},
		LbPolicy:             clusterv3.Cluster_CLUSTER_PROVIDED,
		CircuitBreakers:      defaultCircuitBreakers,
	}
}

// Shared, never altered.
var (
	passthroughHTTPOptions = map[string]*anypb.Any{httpProtocolOptionsKey: gen.MustAny(&httpv3.HttpProtocolOptions{
		CommonHttpProtocolOptions: &corev3.HttpProtocolOptions{IdleTimeout: gen.Duration(5 * time.Minute)},
		UpstreamProtocolOptions: &httpv3.HttpProtocolOptions_UseDownstreamProtocolConfig{UseDownstreamProtocolConfig: &httpv3.HttpProtocolOptions_UseDownstreamHttpConfig{
			HttpProtocolOptions: &corev3.Http1ProtocolOptions{}, Http2ProtocolOptions: &corev3.Http2ProtocolOptions{},
		}},
	})}
	// passthroughHTTPOptionsPreserveCase is passthroughHTTPOptions
	// keeping HTTP/1 header case (proxyHeaders.preserveHttp1HeaderCase).
	passthroughHTTPOptionsPreserveCase = map[string]*anypb.Any{httpProtocolOptionsKey: gen.MustAny(&httpv3.HttpProtocolOptions{
		CommonHttpProtocolOptions: &corev3.HttpProtocolOptions{IdleTimeout: gen.Duration(5 * time.Minute)},
		UpstreamProtocolOptions: &httpv3.HttpProtocolOptions_UseDownstreamProtocolConfig{UseDownstreamProtocolConfig: &httpv3.HttpProtocolOptions_UseDownstreamHttpConfig{
			HttpProtocolOptions: &corev3.Http1ProtocolOptions{HeaderKeyFormat: gen.PreserveCaseHeaderFormat}, Http2ProtocolOptions: &corev3.Http2ProtocolOptions{},
		}},
	})}
	// noCleanup is istiod's cleanup interval of inbound ORIGINAL_DST
	// clusters: the longest a Duration holds (~292 years), so the one
	// host, the application, is never dropped and reconnected every 5s
	// (Envoy's default).
	noCleanup = &durationpb.Duration{Seconds: (math.MaxInt64 - 999999999) / 1_000_000_000}
	// emptyLB is the common_lb_config istiod writes on inbound clusters:
	// all defaults.
	emptyLB = &clusterv3.Cluster_CommonLbConfig{}
)

func blackhole() *clusterv3.Cluster {
	return &clusterv3.Cluster{
		Name: gen.BlackHoleCluster, ConnectTimeout: gen.Duration(10 * time.Second),
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
	}
}

// bindLocal binds connections to the local application to 127.0.0.6
// (::6 for an IPv6-only proxy; a dual-stack one gets both, Envoy picks
// the family of the destination), as istiod's passthrough bind IPs.
func bindLocal(p *model.Proxy) *corev3.BindConfig {
	v4, v6 := p.IPFamilies()
	src := inboundBindAddress
	if v6 && !v4 {
		src = inboundBindAddressIPv6
	}
	b := &corev3.BindConfig{SourceAddress: &corev3.SocketAddress{
		Address: src, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 0},
	}}
	if v4 && v6 {
		b.ExtraSourceAddresses = []*corev3.ExtraSourceAddress{{Address: &corev3.SocketAddress{
			Address: inboundBindAddressIPv6, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 0},
		}}}
	}
	return b
}

// inboundBindAddressIPv6 is inboundBindAddress for IPv6.
const inboundBindAddressIPv6 = "::6"

func inboundPassthrough(p *model.Proxy) *clusterv3.Cluster {
	c := passthrough()
	c.Name = gen.InboundPassthroughCluster
	c.UpstreamBindConfig = bindLocal(p)
	return c
}

// inboundCluster is "inbound|PORT||": an ORIGINAL_DST cluster to the
// local application, bound to 127.0.0.6 as Istio does, with HTTP/2 for
// HTTP2 and gRPC ports. For a Sidecar ingress listener with a
// defaultEndpoint it is a STATIC cluster with that one endpoint, not
// bound when the endpoint is loopback (iptables leaves loopback alone),
// as istiod's buildInboundClustersFromSidecar and buildInboundCluster
// (istio/istio pilot/pkg/networking/core/cluster.go, cluster_builder.go).
// A defaultEndpoint that does not parse gives no cluster (nil), as there.
func inboundCluster(inst scope.Instance, v *scope.View) *clusterv3.Cluster {
	c := meshDefaults(v, originalDst(gen.ClusterName(gen.Inbound, inst.TargetPort, "", "")))
	c.UpstreamBindConfig = bindLocal(v.Proxy)
	// The connection pool reaches the inbound side too (istiod: so the
	// receiver has the capacity its clients are given).
	var policy *networking.TrafficPolicy
	if cp := inboundPolicy(v, inst); cp != nil {
		policy = &networking.TrafficPolicy{ConnectionPool: cp}
		c.CircuitBreakers = circuitBreakers(cp, false)
		if d := cp.GetTcp().GetConnectTimeout(); d != nil {
			c.ConnectTimeout = d
		}
		applyKeepalive(c, cp.GetTcp().GetTcpKeepalive())
	}
	c.TypedExtensionProtocolOptions, _ = protocolOptions(v, inst.Port, policy, false)
	c.CommonLbConfig = emptyLB
	if inst.Endpoint == "" {
		c.CleanupInterval = noCleanup
		return c
	}
	addr, loopback, ok := ingressEndpoint(inst.Endpoint, v.Proxy.IPs)
	if !ok {
		return nil
	}
	c.ClusterDiscoveryType = &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC}
	c.LbPolicy = clusterv3.Cluster_ROUND_ROBIN
	if loopback {
		c.UpstreamBindConfig = nil
	}
	c.LoadAssignment = &endpointv3.ClusterLoadAssignment{ClusterName: c.Name, Endpoints: []*endpointv3.LocalityLbEndpoints{{
		LbEndpoints: []*endpointv3.LbEndpoint{{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{Address: addr}}}},
	}}}
	return c
}

// ingressEndpoint is the address of a Sidecar ingress defaultEndpoint:
// "unix:///path" a pipe; "127.0.0.1:P" and "[::1]:P" loopback;
// "0.0.0.0:P" ("[::]:P") the proxy's first IPv4 (IPv6) address, else
// loopback, as istiod resolves them.
func ingressEndpoint(ep string, ips []string) (addr *corev3.Address, loopback, ok bool) {
	if path, isUnix := strings.CutPrefix(ep, "unix://"); isUnix {
		return &corev3.Address{Address: &corev3.Address_Pipe{Pipe: &corev3.Pipe{Path: path}}}, true, path != ""
	}
	host, port, err := net.SplitHostPort(ep)
	if err != nil {
		return nil, false, false
	}
	n, err := strconv.ParseUint(port, 10, 32)
	if err != nil {
		return nil, false, false
	}
	pick := func(v4 bool, fallback string) string {
		for _, ip := range ips {
			if a, err := netip.ParseAddr(ip); err == nil && a.Is4() == v4 {
				return ip
			}
		}
		return fallback
	}
	switch host {
	case "0.0.0.0":
		host = pick(true, "127.0.0.1")
	case "::":
		host = pick(false, "::1")
	}
	return gen.SocketAddress(host, uint32(n)), host == "127.0.0.1" || host == "::1", true
}
