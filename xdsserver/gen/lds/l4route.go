package lds

import (
	"slices"
	"strings"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/scope"
)

// l4Proxy is the tcp_proxy of a TCP or TLS rule's routes of the
// VirtualService c, reached on listener port, as istiod's
// buildOutboundNetworkFilters: one destination goes to its cluster (its
// name the stat prefix too); several to weighted clusters (those with a
// weight), stat prefix "NAME.NAMESPACE". nil when no route has a weight.
func l4Proxy(v *scope.View, c *config.Config, routes []*networking.RouteDestination, port uint32, portName string) *tcpproxyv3.TcpProxy {
	first := routes[0].GetDestination()
	if len(routes) == 1 {
		cl := l4Cluster(v, c.Namespace, first, port)
		svc := v.ServiceFor(v.FQDN(first.GetHost(), c.Namespace))
		stat := cl
		if pat := v.Push.Mesh.GetOutboundClusterStatName(); pat != "" && svc != nil {
			// istiod: the route's host and subset, the listener's port
			stat = gen.StatName(pat, svc.Hostname, svc.Namespace, svc.Source.Kind == "", first.GetSubset(), port, portName, 0)
		}
		return withPool(v, &tcpproxyv3.TcpProxy{StatPrefix: stat, ClusterSpecifier: &tcpproxyv3.TcpProxy_Cluster{Cluster: cl}}, svc, first.GetSubset())
	}
	wc := &tcpproxyv3.TcpProxy_WeightedCluster{}
	for _, r := range routes {
		if r.GetWeight() > 0 {
			wc.Clusters = append(wc.Clusters, &tcpproxyv3.TcpProxy_WeightedCluster_ClusterWeight{
				Name: l4Cluster(v, c.Namespace, r.GetDestination(), port), Weight: uint32(r.GetWeight())})
		}
	}
	if len(wc.Clusters) == 0 {
		return nil
	}
	return withPool(v, &tcpproxyv3.TcpProxy{StatPrefix: c.Name + "." + c.Namespace, ClusterSpecifier: &tcpproxyv3.TcpProxy_WeightedClusters{WeightedClusters: wc}},
		v.ServiceFor(v.FQDN(first.GetHost(), c.Namespace)), "")
}

// withPool sets on tp what the DestinationRule of svc (the first
// destination's; nil: none known) says about its connections, as istiod's
// buildOutboundNetworkFiltersWithSingleDestination and
// WithWeightedClusters: the top-level TCP pool's idle timeout and
// maximum connection duration, and a source IP hash where the rule's
// balancer (the subset's, when it sets one) hashes by source IP. tp is
// returned.
func withPool(v *scope.View, tp *tcpproxyv3.TcpProxy, svc *model.Service, subset string) *tcpproxyv3.TcpProxy {
	tp.IdleTimeout = gen.NodeIdleTimeout(v.Proxy) // where the rule sets none
	if svc == nil || !v.HasDestinationRules() {
		return tp
	}
	dr := v.DestinationRule(svc)
	if dr == nil {
		return tp
	}
	t := dr.GetTrafficPolicy().GetConnectionPool().GetTcp()
	if t.GetIdleTimeout() != nil {
		tp.IdleTimeout = t.GetIdleTimeout()
	}
	tp.MaxDownstreamConnectionDuration = t.GetMaxConnectionDuration()
	sourceIP := dr.GetTrafficPolicy().GetLoadBalancer().GetConsistentHash().GetUseSourceIp()
	for _, s := range dr.GetSubsets() {
		if s.GetName() != subset {
			continue
		}
		if lb := s.GetTrafficPolicy().GetLoadBalancer(); lb != nil {
			sourceIP = lb.GetConsistentHash().GetUseSourceIp()
		}
		break
	}
	if sourceIP {
		tp.HashPolicy = sourceIPHash
	}
	return tp
}

// sourceIPHash is shared by every tcp_proxy that hashes by source IP;
// never altered.
var sourceIPHash = []*typev3.HashPolicy{{PolicySpecifier: &typev3.HashPolicy_SourceIp_{SourceIp: &typev3.HashPolicy_SourceIp{}}}}

// l4Cluster is a route destination's cluster (istiod's
// GetDestinationCluster): its port, else a single-port service's port,
// else the listener's.
func l4Cluster(v *scope.View, ns string, d *networking.Destination, port uint32) string {
	host := v.FQDN(d.GetHost(), ns)
	p := d.GetPort().GetNumber()
	if p == 0 {
		p = port
		if svc := v.ServiceFor(host); svc != nil {
			if dp, ok := scope.DestinationPort(svc, 0, port); ok {
				p = dp.Number
			}
		}
	}
	return gen.ClusterName(gen.Outbound, p, d.GetSubset(), host)
}

// tlsChains are the chains of a sidecar's TLS or HTTPS service port, as
// istiod's buildSidecarOutboundTLSFilterChainOpts: one per TLS route
// match of the host's VirtualService that applies to this sidecar (by
// its SNI hosts and destination subnets, the first match of each such
// pair only), else one to the service's cluster, matched by the host as
// SNI only where the listener cannot tell the service by address (no
// address of its own, or a CIDR).
func tlsChains(v *scope.View, svc *model.Service, p model.Port, addr string, cidrs []string) []outChain {
	var out []outChain
	if c := v.VirtualServiceFor(svc.Hostname); c != nil {
		var seen []string
		for _, r := range c.Spec.(*networking.VirtualService).GetTls() {
			if len(r.GetRoute()) == 0 {
				continue
			}
			for _, m := range r.GetMatch() {
				if !l4Applies(v, m.GetPort(), m.GetGateways(), m.GetSourceLabels(), m.GetSourceNamespace(), p.Number) {
					continue
				}
				key := strings.Join(m.GetSniHosts(), ",") + "|" + strings.Join(m.GetDestinationSubnets(), ",")
				if slices.Contains(seen, key) {
					continue
				}
				seen = append(seen, key)
				tp := l4Proxy(v, c, r.GetRoute(), p.Number, p.Name)
				if tp == nil {
					continue
				}
				ch := outChain{cidrs: cidrs, sni: m.GetSniHosts(), fc: &listenerv3.FilterChain{
					Filters: []*listenerv3.Filter{tcpProxyTo(tp)}, Metadata: vsMetadata(c)}}
				if len(m.GetDestinationSubnets()) > 0 {
					ch.cidrs = m.GetDestinationSubnets()
				}
				if len(ch.sni) > 0 {
					ch.fc.FilterChainMatch = &listenerv3.FilterChainMatch{ServerNames: ch.sni}
				}
				out = append(out, ch)
			}
		}
	}
	if len(out) > 0 {
		return out
	}
	port := p.Number
	if len(svc.Ports) == 1 {
		port = svc.Ports[0].Number
	}
	cluster := gen.ClusterName(gen.Outbound, port, "", svc.Hostname)
	ch := outChain{cidrs: cidrs, fc: &listenerv3.FilterChain{Filters: []*listenerv3.Filter{tcpProxyTo(serviceProxy(v, svc, port, cluster))}}}
	if len(cidrs) > 0 || addr == "" {
		ch.sni = []string{svc.Hostname}
		ch.fc.FilterChainMatch = &listenerv3.FilterChainMatch{ServerNames: ch.sni}
	}
	return []outChain{ch}
}

// serviceProxy is the tcp_proxy of a service port's own chain, to its
// cluster: the stat prefix is the cluster's name, or the mesh's
// outboundClusterStatName with no subset and no port name (istiod builds
// it from the port number alone there), and the service's
// DestinationRule shapes it (withPool).
func serviceProxy(v *scope.View, svc *model.Service, port uint32, cluster string) *tcpproxyv3.TcpProxy {
	stat := cluster
	if pat := v.Push.Mesh.GetOutboundClusterStatName(); pat != "" {
		stat = gen.StatName(pat, svc.Hostname, svc.Namespace, svc.Source.Kind == "", "", port, "", 0)
	}
	return withPool(v, &tcpproxyv3.TcpProxy{StatPrefix: stat, ClusterSpecifier: &tcpproxyv3.TcpProxy_Cluster{Cluster: cluster}}, svc, "")
}
