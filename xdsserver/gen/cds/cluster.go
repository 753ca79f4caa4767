package cds

import (
	"strings"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	meshconfig "istio.io/api/mesh/v1alpha1"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/eds"
	"github.com/baremesh/baremesh/xdsserver/gen/scope"
)

const httpProtocolOptionsKey = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"

// outboundCluster builds "outbound|PORT|SUBSET|HOST".
func outboundCluster(v *scope.View, svc *model.Service, p model.Port, subset string, labels map[string]string, policy *networking.TrafficPolicy) *clusterv3.Cluster {
	return buildOutbound(v, svc, p, gen.ClusterName(gen.Outbound, p.Number, subset, svc.Hostname), subset, labels, policy, true)
}

// sniCluster builds "outbound_.PORT_.SUBSET_.HOST", the cluster an
// AUTO_PASSTHROUGH gateway forwards that SNI to: outboundCluster's
// without TLS of its own (the client's mTLS passes through), as istiod's
// SniDnatClusterMode.
func sniCluster(v *scope.View, svc *model.Service, p model.Port, subset string, labels map[string]string, policy *networking.TrafficPolicy) *clusterv3.Cluster {
	return buildOutbound(v, svc, p, gen.SNIClusterName(p.Number, subset, svc.Hostname), subset, labels, policy, false)
}

// buildOutbound builds cluster name of svc's port p (subset's endpoints,
// with labels), with its TLS unless tls is false.
func buildOutbound(v *scope.View, svc *model.Service, p model.Port, name, subset string, labels map[string]string, policy *networking.TrafficPolicy, tls bool) *clusterv3.Cluster {
	c := &clusterv3.Cluster{Name: name}
	proxyless := v.Proxy.Proxyless
	if !proxyless {
		c.ConnectTimeout = connectTimeout(v, policy) // gRPC has its own connect timeouts and reads none
	}
	switch {
	case scope.UsesEDS(v.Proxy, svc):
		edsConfig(c, proxyless)
	case svc.Resolution == model.Passthrough || strings.HasPrefix(svc.Hostname, "*"):
		if proxyless {
			return eds0(c) // grpc-go has no ORIGINAL_DST: an empty EDS cluster
		}
		c.ClusterDiscoveryType = &clusterv3.Cluster_Type{Type: clusterv3.Cluster_ORIGINAL_DST}
		c.LbPolicy = clusterv3.Cluster_CLUSTER_PROVIDED
		applyPolicy(c, v, svc, p, policy, false)
		if tls { // not on a gateway's SNI-DNAT clusters, as istiod
			applyProxyProtocol(c, policy.GetProxyProtocol())
		}
		return c
	default: // DNS
		typ := clusterv3.Cluster_STRICT_DNS
		if svc.Resolution == model.DNSRoundRobinLB || proxyless {
			typ = clusterv3.Cluster_LOGICAL_DNS
		}
		c.ClusterDiscoveryType = &clusterv3.Cluster_Type{Type: typ}
		c.DnsLookupFamily = clusterv3.Cluster_V4_ONLY
		if !proxyless {
			dnsRefresh(c, v)
		}
		c.LoadAssignment = dnsAssignment(v, svc, p, labels, name, policy, typ == clusterv3.Cluster_LOGICAL_DNS)
	}
	h2 := applyPolicy(c, v, svc, p, policy, true)
	switch {
	case !tls:
	case !proxyless:
		applyTLS(c, v, svc, p, subset, policy.GetTls(), h2)
	default:
		c.TransportSocket = grpcTLS(v, svc, policy.GetTls())
	}
	if tls && !proxyless { // gRPC has no PROXY protocol (istiod's grpcgen sends none); nor a gateway's SNI-DNAT cluster
		applyProxyProtocol(c, policy.GetProxyProtocol())
	}
	return c
}

func eds0(c *clusterv3.Cluster) *clusterv3.Cluster {
	edsConfig(c, true)
	return c
}

// edsConfig makes c an EDS cluster over ADS. An Envoy waits for its
// endpoints (gen.ADS: initial_fetch_timeout 0s); a proxyless client gets
// the bare ADS source istiod's grpcgen gives it (gRPC reads neither the
// timeout nor the API version).
func edsConfig(c *clusterv3.Cluster, proxyless bool) {
	src := gen.ADS()
	if proxyless {
		src = grpcADS
	}
	c.ClusterDiscoveryType = &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS}
	c.EdsClusterConfig = &clusterv3.Cluster_EdsClusterConfig{EdsConfig: src, ServiceName: c.Name}
}

// grpcADS is a proxyless client's EDS config source. Shared, never altered.
var grpcADS = &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}}

// dnsAssignment inlines the endpoints of a DNS cluster: the service's
// endpoint addresses, or the hostname itself when it has none (Istio's
// ServiceEntry without endpoints). LOGICAL_DNS takes exactly one.
func dnsAssignment(v *scope.View, svc *model.Service, p model.Port, labels map[string]string, name string, policy *networking.TrafficPolicy, single bool) *endpointv3.ClusterLoadAssignment {
	if single {
		policy = withoutLocalityLB(policy)
	}
	cla := eds.LoadAssignment(v, svc, p, labels, name, policy)
	if len(cla.Endpoints) == 0 {
		cla.Endpoints = []*endpointv3.LocalityLbEndpoints{{LbEndpoints: []*endpointv3.LbEndpoint{{
			HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{Address: gen.SocketAddress(svc.Hostname, p.Number)}},
		}}}}
		// Its workload is the ServiceEntry, as istiod names it.
		eds.AddWorkloadMetadata(cla.Endpoints[0].LbEndpoints[0], &model.Endpoint{Workload: config.Key{Name: svc.Source.Name, Namespace: svc.Namespace}})
	}
	if single {
		first := cla.Endpoints[0]
		first.LbEndpoints = first.LbEndpoints[:1]
		first.Priority = 0
		first.LoadBalancingWeight = nil
		cla.Endpoints = cla.Endpoints[:1]
	}
	return cla
}

func connectTimeout(v *scope.View, policy *networking.TrafficPolicy) *durationpb.Duration {
	if d := policy.GetConnectionPool().GetTcp().GetConnectTimeout(); d != nil {
		return d
	}
	if v.Push.Mesh != nil && v.Push.Mesh.GetConnectTimeout() != nil {
		return v.Push.Mesh.GetConnectTimeout()
	}
	return gen.Duration(10 * time.Second)
}

// protocolOptions is a cluster's upstream HTTP protocol options, built
// in istiod's order (setUpstreamProtocol, applyH2Upgrade,
// applyConnectionPool, and clusterWrapper.build's HTTP/1 default), and
// whether the cluster is HTTP/2 (istiod's isHttp2Cluster, which decides
// the h2 ALPN of its TLS): HTTP/2 for HTTP2 and gRPC ports and where
// h2UpgradePolicy (the pool's, else the mesh's for HTTP ports) upgrades
// an outbound cluster; from a sidecar to an auto-detected port, or with
// useClientProtocol, the protocol the request came in; the pool's idle
// timeout (its TCP one when HTTP sets none, as for TCP clusters too),
// maximum connection duration and requests per connection, and on an
// HTTP/2 cluster its stream limit and keepalive. nil when none applies;
// a proxyless client gets none.
func protocolOptions(v *scope.View, p model.Port, policy *networking.TrafficPolicy, outbound bool) (map[string]*anypb.Any, bool) {
	proxy := v.Proxy
	if proxy.Proxyless {
		return nil, false
	}
	cp := policy.GetConnectionPool()
	h, t := cp.GetHttp(), cp.GetTcp()
	downstream := p.Protocol == model.Unsupported && proxy.Type == model.SidecarProxy
	h2 := p.Protocol.IsHTTP2() || !downstream && outbound && h2Upgrade(p, v.Push.Mesh.GetH2UpgradePolicy(), h)
	idle := h.GetIdleTimeout()
	if idle == nil {
		idle = t.GetIdleTimeout()
	}
	maxConn := t.GetMaxConnectionDuration()
	common := idle != nil || maxConn != nil || h.GetMaxRequestsPerConnection() > 0 || h.GetMaxConcurrentStreams() > 0 || h.GetHttp2KeepAlive() != nil
	useClient := h.GetUseClientProtocol()
	// proxyHeaders.preserveHttp1HeaderCase on an HTTP/1 or auto port: as
	// istiod's setUpstreamProtocol, HTTP/1 with the preserve_case header
	// format, explicit (it replaces an HTTP/2 upgrade), or under the
	// downstream protocol on a sidecar's auto port.
	if gen.ProxyHeadersOf(proxy, v.Push.Mesh).PreserveHTTP1Case && !p.Protocol.IsHTTP2() && (p.Protocol.IsHTTP() || p.Protocol == model.Unsupported) {
		opts := &httpv3.HttpProtocolOptions{}
		if common {
			opts.CommonHttpProtocolOptions = &corev3.HttpProtocolOptions{IdleTimeout: idle, MaxConnectionDuration: maxConn}
			if n := h.GetMaxRequestsPerConnection(); n > 0 {
				opts.CommonHttpProtocolOptions.MaxRequestsPerConnection = gen.U32(uint32(n))
			}
		}
		h1 := &corev3.Http1ProtocolOptions{HeaderKeyFormat: gen.PreserveCaseHeaderFormat}
		if downstream {
			opts.UpstreamProtocolOptions = &httpv3.HttpProtocolOptions_UseDownstreamProtocolConfig{UseDownstreamProtocolConfig: &httpv3.HttpProtocolOptions_UseDownstreamHttpConfig{
				HttpProtocolOptions: h1, Http2ProtocolOptions: &corev3.Http2ProtocolOptions{},
			}}
		} else {
			opts.UpstreamProtocolOptions = &httpv3.HttpProtocolOptions_ExplicitHttpConfig_{ExplicitHttpConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig{
				ProtocolConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_HttpProtocolOptions{HttpProtocolOptions: h1},
			}}
		}
		return map[string]*anypb.Any{httpProtocolOptionsKey: gen.MustAny(opts)}, false
	}
	switch {
	case !h2 && !downstream && !common && !useClient:
		return nil, false
	case !common && !useClient && h2:
		return h2Only, true
	case !common && (downstream || useClient):
		return useDownstream, false
	}
	opts := &httpv3.HttpProtocolOptions{}
	if common {
		opts.CommonHttpProtocolOptions = &corev3.HttpProtocolOptions{IdleTimeout: idle, MaxConnectionDuration: maxConn}
		if n := h.GetMaxRequestsPerConnection(); n > 0 {
			opts.CommonHttpProtocolOptions.MaxRequestsPerConnection = gen.U32(uint32(n))
		}
	}
	switch {
	case useClient || downstream:
		opts.UpstreamProtocolOptions = useDownstreamConfig
		h2 = false
	case h2:
		h2o := &corev3.Http2ProtocolOptions{}
		if n := h.GetMaxConcurrentStreams(); n > 0 {
			h2o.MaxConcurrentStreams = gen.U32(uint32(n))
		}
		if ka := h.GetHttp2KeepAlive(); ka != nil {
			h2o.ConnectionKeepalive = &corev3.KeepaliveSettings{Interval: ka.GetInterval(), Timeout: ka.GetTimeout()}
		}
		opts.UpstreamProtocolOptions = &httpv3.HttpProtocolOptions_ExplicitHttpConfig_{ExplicitHttpConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig{
			ProtocolConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_Http2ProtocolOptions{Http2ProtocolOptions: h2o},
		}}
	default:
		opts.UpstreamProtocolOptions = &httpv3.HttpProtocolOptions_ExplicitHttpConfig_{ExplicitHttpConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig{
			ProtocolConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_HttpProtocolOptions{HttpProtocolOptions: &corev3.Http1ProtocolOptions{}},
		}}
	}
	return map[string]*anypb.Any{httpProtocolOptionsKey: gen.MustAny(opts)}, h2
}

// h2Upgrade is istiod's shouldH2Upgrade: the pool's h2UpgradePolicy
// decides (never with useClientProtocol); without one, the mesh's, for
// HTTP ports only.
func h2Upgrade(p model.Port, mesh meshconfig.MeshConfig_H2UpgradePolicy, h *networking.ConnectionPoolSettings_HTTPSettings) bool {
	switch {
	case h.GetUseClientProtocol():
		return false
	case h.GetH2UpgradePolicy() == networking.ConnectionPoolSettings_HTTPSettings_UPGRADE:
		return true
	case h.GetH2UpgradePolicy() == networking.ConnectionPoolSettings_HTTPSettings_DO_NOT_UPGRADE:
		return false
	}
	return p.Protocol.IsHTTP() && mesh == meshconfig.MeshConfig_UPGRADE
}

// Shared, never altered.
var (
	useDownstreamConfig = &httpv3.HttpProtocolOptions_UseDownstreamProtocolConfig{UseDownstreamProtocolConfig: &httpv3.HttpProtocolOptions_UseDownstreamHttpConfig{
		HttpProtocolOptions: &corev3.Http1ProtocolOptions{}, Http2ProtocolOptions: &corev3.Http2ProtocolOptions{},
	}}
	useDownstream = map[string]*anypb.Any{httpProtocolOptionsKey: gen.MustAny(&httpv3.HttpProtocolOptions{UpstreamProtocolOptions: useDownstreamConfig})}
	h2Only        = map[string]*anypb.Any{httpProtocolOptionsKey: gen.MustAny(&httpv3.HttpProtocolOptions{UpstreamProtocolOptions: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_{
		ExplicitHttpConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig{ProtocolConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_Http2ProtocolOptions{Http2ProtocolOptions: &corev3.Http2ProtocolOptions{}}},
	}})}
)

// dnsRefresh re-resolves a DNS cluster's names as istiod has Envoy do:
// every meshConfig dnsRefreshRate (60s by default; Envoy's own default
// is 5s) with 100ms jitter (PILOT_DNS_JITTER_DURATION), sooner when a
// record's TTL runs out.
func dnsRefresh(c *clusterv3.Cluster, v *scope.View) {
	rate := defaultDNSRefresh
	if r := v.Push.Mesh.GetDnsRefreshRate(); r != nil {
		rate = r
	}
	//lint:ignore SA1019 deprecated for typed_dns_resolver_config; what istiod sets
	c.DnsRefreshRate, c.DnsJitter, c.RespectDnsTtl = rate, dnsJitter, true
}

// Shared, never altered.
var (
	defaultDNSRefresh = gen.Duration(60 * time.Second)
	dnsJitter         = gen.Duration(100 * time.Millisecond)
)

// withoutLocalityLB is policy with locality load balancing turned off.
// A LOGICAL_DNS cluster keeps one endpoint, whose locality weight and
// priority Envoy does not use; distribute could only empty its locality
// (istiod does, and Envoy then rejects the cluster).
func withoutLocalityLB(policy *networking.TrafficPolicy) *networking.TrafficPolicy {
	out := &networking.TrafficPolicy{}
	if policy != nil {
		out = proto.Clone(policy).(*networking.TrafficPolicy)
	}
	if out.LoadBalancer == nil {
		out.LoadBalancer = &networking.LoadBalancerSettings{}
	}
	out.LoadBalancer.LocalityLbSetting = &networking.LocalityLoadBalancerSetting{Enabled: wrapperspb.Bool(false)}
	return out
}
