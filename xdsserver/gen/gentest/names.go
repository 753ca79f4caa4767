package gentest

import (
	"slices"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/baremesh/baremesh/xdsserver/gen"
)

// RouteNames lists the RDS names the listeners refer to, in order, once
// each: what a proxy subscribes to after LDS.
func RouteNames(listeners []gen.Resource) []string {
	seen := map[string]bool{}
	var out []string
	add := func(a *anypb.Any) {
		h := &hcmv3.HttpConnectionManager{}
		if a == nil || a.UnmarshalTo(h) != nil {
			return
		}
		if n := h.GetRds().GetRouteConfigName(); n != "" && !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	for _, r := range listeners {
		l, ok := r.Resource.(*listenerv3.Listener)
		if !ok {
			continue
		}
		add(l.GetApiListener().GetApiListener())
		chains := append([]*listenerv3.FilterChain{}, l.GetFilterChains()...)
		if l.GetDefaultFilterChain() != nil {
			chains = append(chains, l.GetDefaultFilterChain())
		}
		for _, fc := range chains {
			for _, f := range fc.GetFilters() {
				add(f.GetTypedConfig())
			}
		}
	}
	return out
}

// EDSNames lists the EDS service names of the EDS clusters: what a proxy
// subscribes to after CDS.
func EDSNames(clusters []gen.Resource) []string {
	var out []string
	for _, r := range clusters {
		c, ok := r.Resource.(*clusterv3.Cluster)
		if ok && c.GetType() == clusterv3.Cluster_EDS {
			n := c.GetEdsClusterConfig().GetServiceName()
			if n == "" {
				n = c.GetName()
			}
			out = append(out, n)
		}
	}
	return out
}

// SecretNames lists the SDS names the listeners' TLS contexts refer to,
// sorted, once each: what a gateway subscribes to after LDS.
func SecretNames(listeners []gen.Resource) []string {
	seen := map[string]bool{}
	var out []string
	add := func(c *tlsv3.SdsSecretConfig) {
		if n := c.GetName(); n != "" && !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	for _, r := range listeners {
		l, ok := r.Resource.(*listenerv3.Listener)
		if !ok {
			continue
		}
		for _, fc := range l.GetFilterChains() {
			ctx := &tlsv3.DownstreamTlsContext{}
			if a := fc.GetTransportSocket().GetTypedConfig(); a == nil || a.UnmarshalTo(ctx) != nil {
				continue
			}
			for _, c := range ctx.GetCommonTlsContext().GetTlsCertificateSdsSecretConfigs() {
				add(c)
			}
			add(ctx.GetCommonTlsContext().GetValidationContextSdsSecretConfig())
		}
	}
	slices.Sort(out)
	return out
}
