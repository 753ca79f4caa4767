package cds

import (
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/scope"
)

// inboundBindAddress is the source address Istio gives connections to
// the local application, so capture rules can exempt them.
const inboundBindAddress = "127.0.0.6"

func passthrough() *clusterv3.Cluster {
	return &clusterv3.Cluster{
		Name: gen.PassthroughCluster, ConnectTimeout: gen.Duration(10 * time.Second),
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_ORIGINAL_DST},
		LbPolicy:             clusterv3.Cluster_CLUSTER_PROVIDED,
	}
}

func blackhole() *clusterv3.Cluster {
	return &clusterv3.Cluster{
		Name: gen.BlackHoleCluster, ConnectTimeout: gen.Duration(10 * time.Second),
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
	}
}

func bindLocal() *corev3.BindConfig {
	return &corev3.BindConfig{SourceAddress: &corev3.SocketAddress{
		Address: inboundBindAddress, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 0},
	}}
}

func inboundPassthrough() *clusterv3.Cluster {
	c := passthrough()
	c.Name = gen.InboundPassthroughCluster
	c.UpstreamBindConfig = bindLocal()
	return c
}

// inboundCluster is "inbound|PORT||": an ORIGINAL_DST cluster to the
// local application, bound to 127.0.0.6 as Istio does, with HTTP/2 for
// HTTP2 and gRPC ports.
func inboundCluster(inst scope.Instance, v *scope.View) *clusterv3.Cluster {
	c := passthrough()
	c.Name = gen.ClusterName(gen.Inbound, inst.TargetPort, "", "")
	c.UpstreamBindConfig = bindLocal()
	c.TypedExtensionProtocolOptions = protocolOptions(inst.Port, nil, v.Proxy.Proxyless)
	return c
}
