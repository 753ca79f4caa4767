package cds

import (
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	proxyprotocolv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/proxy_protocol/v3"
	rawbufferv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/raw_buffer/v3"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/baremesh/baremesh/xdsserver/gen"
)

// rawBuffer is the plain TCP socket istiod wraps when a cluster has no
// TLS (named "raw_buffer" as istiod names it). Shared, never altered.
var rawBuffer = &corev3.TransportSocket{Name: "raw_buffer", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: gen.MustAny(&rawbufferv3.RawBuffer{})}}

// applyProxyProtocol makes c send the PROXY protocol header a
// DestinationRule's proxyProtocol asks for (V1 or V2) before anything
// else on each upstream connection, as istiod's
// applyUpstreamProxyProtocol: c's transport socket, each of its auto-mTLS
// matches, or plain TCP, wrapped in Envoy's upstream_proxy_protocol
// socket. The matches are new; the sockets and matches c had are not
// altered (they may be shared).
func applyProxyProtocol(c *clusterv3.Cluster, pp *networking.TrafficPolicy_ProxyProtocol) {
	if pp == nil {
		return
	}
	wrap := func(inner *corev3.TransportSocket) *corev3.TransportSocket {
		return &corev3.TransportSocket{Name: "envoy.transport_sockets.upstream_proxy_protocol", ConfigType: &corev3.TransportSocket_TypedConfig{
			TypedConfig: gen.MustAny(&proxyprotocolv3.ProxyProtocolUpstreamTransport{
				Config:          &corev3.ProxyProtocolConfig{Version: corev3.ProxyProtocolConfig_Version(pp.GetVersion())},
				TransportSocket: inner,
			}),
		}}
	}
	if c.TransportSocket == nil && len(c.TransportSocketMatches) == 0 {
		c.TransportSocket = wrap(rawBuffer)
		return
	}
	if c.TransportSocket != nil {
		c.TransportSocket = wrap(c.TransportSocket)
	}
	if len(c.TransportSocketMatches) > 0 {
		matches := make([]*clusterv3.Cluster_TransportSocketMatch, len(c.TransportSocketMatches))
		for i, m := range c.TransportSocketMatches {
			matches[i] = &clusterv3.Cluster_TransportSocketMatch{Name: m.GetName(), Match: m.GetMatch(), TransportSocket: wrap(m.GetTransportSocket())}
		}
		c.TransportSocketMatches = matches
	}
}
