package gentest

import (
	"iter"
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
	var out once
	add := func(a *anypb.Any) {
		h := &hcmv3.HttpConnectionManager{}
		if a != nil && a.UnmarshalTo(h) == nil {
			out.add(h.GetRds().GetRouteConfigName())
		}
	}
	for l := range listenersOf(listeners) {
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
	return out.list
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
	var out once
	for l := range listenersOf(listeners) {
		for _, fc := range l.GetFilterChains() {
			ctx := &tlsv3.DownstreamTlsContext{}
			if a := fc.GetTransportSocket().GetTypedConfig(); a == nil || a.UnmarshalTo(ctx) != nil {
				continue
			}
			for _, c := range ctx.GetCommonTlsContext().GetTlsCertificateSdsSecretConfigs() {
				out.add(c.GetName())
			}
			out.add(ctx.GetCommonTlsContext().GetValidationContextSdsSecretConfig().GetName())
			if c := ctx.GetCommonTlsContext().GetCombinedValidationContext().GetValidationContextSdsSecretConfig(); c.GetSdsConfig().GetAds() != nil {
				out.add(c.GetName()) // a credential's CA over ADS (workload roots come from the agent)
			}
		}
	}
	slices.Sort(out.list)
	return out.list
}

// listenersOf yields the listeners among resources.
func listenersOf(resources []gen.Resource) iter.Seq[*listenerv3.Listener] {
	return func(yield func(*listenerv3.Listener) bool) {
		for _, r := range resources {
			if l, ok := r.Resource.(*listenerv3.Listener); ok && !yield(l) {
				return
			}
		}
	}
}

// once collects names in the order added, each once; "" is no name.
type once struct {
	seen map[string]bool
	list []string
}

func (o *once) add(name string) {
	if name == "" || o.seen[name] {
		return
	}
	if o.seen == nil {
		o.seen = map[string]bool{}
	}
	o.seen[name] = true
	o.list = append(o.list, name)
}
