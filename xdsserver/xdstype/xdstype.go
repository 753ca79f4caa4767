// Package xdstype is the table of xDS types the server serves: each type
// is declared once, in All, with every trait the protocol and the
// generation stage need (type URL, short name, generator, cache policy,
// push order, whether SotW may send it partially, its wildcard default,
// the config kinds that affect it, its per-type gRPC service). Adding a
// type is one entry here plus its generator; nothing else in the server
// names a type URL.
//
// It imports core and the generators (xdsserver/gen/...), never the
// protocol (ads), generation (build) or wire packages.
package xdstype

import (
	"slices"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/service/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/service/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/service/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/service/route/v3"
	secretv3 "github.com/envoyproxy/go-control-plane/envoy/service/secret/v3"
	"google.golang.org/grpc"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/core/push"
	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/cds"
	"github.com/baremesh/baremesh/xdsserver/gen/eds"
	"github.com/baremesh/baremesh/xdsserver/gen/lds"
	"github.com/baremesh/baremesh/xdsserver/gen/nds"
	"github.com/baremesh/baremesh/xdsserver/gen/proxyconfig"
	"github.com/baremesh/baremesh/xdsserver/gen/rds"
	"github.com/baremesh/baremesh/xdsserver/gen/sds"
)

// Type is one xDS resource type and its traits. A Type is not altered
// once the server has it.
type Type struct {
	// URL is the type URL of the resources, as requests name it.
	URL string
	// Short names the type in metrics labels, logs and debug pages.
	Short string
	// Generate builds the type's resources.
	Generate gen.Generator
	// Cache is how generation results are cached.
	Cache Cache
	// Order is the push order (lower first): clusters before their
	// endpoints, listeners before their routes, as Envoy's xDS docs
	// advise.
	Order int
	// Partial: a SotW response may carry a subset of the subscription.
	// True for named types that are not state of the world (EDS, RDS);
	// the others are always sent whole.
	Partial bool
	// Wildcard: a first Delta request that names nothing subscribes to
	// everything (the legacy wildcard of LDS and CDS).
	Wildcard bool
	// Endpoints: an endpoint-only push regenerates this type, narrowed to
	// the clusters of the services whose endpoints changed.
	Endpoints bool
	// EndpointsMatter, when set on an Endpoints type, says whether an
	// endpoint-only change of the changed services can alter the type
	// for proxy p on snapshot pc; nil means it can. It must be cheap: it
	// runs per proxy and push.
	EndpointsMatter func(pc *push.PushContext, p *model.Proxy, changed map[model.ServiceKey]bool) bool
	// Affects says which config kinds can change this type, and for which
	// proxies. Services (ServiceEntry, WorkloadEntry, by req.Services)
	// affect every type of a proxy that sees them; a kind no type lists
	// and not in Inert affects everything.
	Affects map[config.Kind]Reach
	// Service is the type's own (non-ADS) discovery service, or nil.
	Service *grpc.ServiceDesc
}

// Cache is a generation cache policy.
type Cache int

// Cache policies.
const (
	// NoCache generates for every proxy.
	NoCache Cache = iota
	// CacheShape caches a proxy's whole output by the proxy fields the
	// generator reads (LDS, CDS, RDS): proxies of one shape share it.
	CacheShape
	// CachePerName caches each resource by its name and the proxy fields
	// it depends on (EDS: one ClusterLoadAssignment per cluster).
	CachePerName
)

// Reach is which proxies a change of a config kind can affect.
type Reach int

// Reaches.
const (
	// Everyone: every proxy.
	Everyone Reach = iota + 1
	// Routers: gateways only (a Gateway).
	Routers
	// Bound: gateways, and sidecars unless the config binds to gateways
	// only (a VirtualService).
	Bound
	// Scoped: proxies in the config's namespace or the root namespace (a
	// Sidecar).
	Scoped
)

// The types baremesh serves.
var (
	Cluster = &Type{
		URL: "type.googleapis.com/envoy.config.cluster.v3.Cluster", Short: "cds",
		Generate: cds.Generate, Cache: CacheShape, Order: 0, Wildcard: true,
		Affects: map[config.Kind]Reach{config.Gateway: Routers, config.VirtualService: Routers,
			config.DestinationRule: Everyone, config.Sidecar: Scoped, config.PeerAuthentication: Everyone,
			config.EnvoyFilter: Everyone},
		Service: &clusterv3.ClusterDiscoveryService_ServiceDesc,
	}
	Endpoint = &Type{
		URL: "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment", Short: "eds",
		Generate: eds.Generate, Cache: CachePerName, Order: 1, Partial: true, Endpoints: true,
		// PeerAuthentication: an endpoint's tlsMode metadata follows its
		// workload's mode (eds.tlsMode, as istiod's mtlsChecker).
		Affects: map[config.Kind]Reach{config.DestinationRule: Everyone, config.Sidecar: Scoped, config.PeerAuthentication: Everyone},
		Service: &endpointv3.EndpointDiscoveryService_ServiceDesc,
	}
	Listener = &Type{
		URL: "type.googleapis.com/envoy.config.listener.v3.Listener", Short: "lds",
		Generate: lds.Generate, Cache: CacheShape, Order: 2, Wildcard: true,
		Affects: map[config.Kind]Reach{config.Gateway: Routers, config.VirtualService: Bound,
			config.Sidecar: Scoped, config.PeerAuthentication: Everyone, config.AuthorizationPolicy: Everyone,
			config.RequestAuthentication: Everyone, config.EnvoyFilter: Everyone, config.Telemetry: Everyone},
		Service: &listenerv3.ListenerDiscoveryService_ServiceDesc,
	}
	Route = &Type{
		URL: "type.googleapis.com/envoy.config.route.v3.RouteConfiguration", Short: "rds",
		Generate: rds.Generate, Cache: CacheShape, Order: 3, Partial: true,
		Affects: map[config.Kind]Reach{config.Gateway: Routers, config.VirtualService: Bound,
			config.DestinationRule: Everyone, config.Sidecar: Scoped, config.EnvoyFilter: Everyone},
		Service: &routev3.RouteDiscoveryService_ServiceDesc,
	}
)

// Secret is SDS: the credentials Gateway servers name (credentialName),
// by name only, after the listeners that reference them. Only a
// credentials change (a push with reason "credentials", judged in
// generation.Affected) or a Gateway change can alter it.
var Secret = &Type{
	URL: "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret", Short: "sds",
	Generate: sds.Generate, Cache: NoCache, Order: 4, Partial: true,
	Affects: map[config.Kind]Reach{config.Gateway: Routers},
	Service: &secretv3.SecretDiscoveryService_ServiceDesc,
}

// NameTable is Istio's DNS name table (NDS), which Istio's agent asks
// for when it captures DNS: one unnamed resource, always sent whole, so
// the agent's wildcard request gets it. Not cached: the table depends on
// the proxy's Sidecar scope, IP families, network and auto-allocation
// flag, and on the endpoints of headless services, more than a shape key
// holds; it is cheap to build. Services and Sidecars change it; so may
// an endpoint push of a headless service (its IPs are in the table): it
// is regenerated only for those, and sent only when its bytes changed,
// so an endpoint change that moves no address of the table pushes
// nothing.
var NameTable = &Type{
	URL: nds.TypeURL, Short: "nds", Generate: nds.Generate, Cache: NoCache, Order: 5,
	Wildcard: true, Endpoints: true, EndpointsMatter: nds.EndpointsMatter, Affects: map[config.Kind]Reach{config.Sidecar: Scoped},
}

// ProxyConfig is Istio's dynamic proxy config (PCDS), which Istio's
// agent asks for with PROXY_CONFIG_XDS_AGENT=true: one unnamed resource
// with the trust bundle (the CA's roots and the mesh config's
// caCertificates). It depends on the snapshot's mesh config and roots
// only, never on config kinds (it lists none, so a config change does
// not regenerate it); a mesh config change or a new root ("trust")
// regenerates every type. Not cached: it is generated on those rare
// pushes only, and reads nothing of the proxy.
var ProxyConfig = &Type{
	URL: proxyconfig.TypeURL, Short: "pcds", Generate: proxyconfig.Generate, Cache: NoCache, Order: 6,
	Wildcard: true, Affects: map[config.Kind]Reach{},
}

// All is every type baremesh serves, in push order. It must not be
// altered.
var All = append([]*Type{Cluster, Endpoint, Listener, Route, Secret, NameTable, ProxyConfig}, IstioConfig...)

// With returns a copy of t that generates with g (for tests that stand a
// generator in).
func (t *Type) With(g gen.Generator) *Type {
	c := *t
	c.Generate = g
	return &c
}

// Sorted returns types in push order (a new slice).
func Sorted(types []*Type) []*Type {
	out := slices.Clone(types)
	slices.SortStableFunc(out, func(a, b *Type) int { return a.Order - b.Order })
	return out
}
