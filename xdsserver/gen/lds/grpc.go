package lds

import (
	"net/netip"
	"regexp"
	"strconv"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	rbachttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"

	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/authz"
	"github.com/baremesh/baremesh/xdsserver/gen/scope"
)

// grpcListeners answers a proxyless gRPC proxy, as istiod's grpcgen.
// Each name is either a client target ("host:port", short names resolved
// in the proxy's namespace): an API listener of that exact name whose
// HTTP connection manager fetches the route config
// "outbound|PORT||HOST" of the service port (grpcClientListener); or a
// server's "xds.istio.io/grpc/lds/inbound/IP:PORT" (the template of
// Istio's agent bootstrap) or "grpc/server?xds.resource.listening_address=IP:PORT"
// (grpc-go's default): a listener on IP:PORT with one filter chain whose
// inline route answers every RPC locally (grpcServerListener). With no
// names (wildcard), every visible service port's "host:port".
//
// Where istiod answers less, ours answers the name a client asked for: a
// target without a port for a service of one port (istiod's listeners
// are then named "host:PORT", which the client did not ask for), a
// short name "svc.ns" from another namespace (istiod expands short names
// in the proxy's own namespace only).
func grpcListeners(v *scope.View, names []string) []gen.Resource {
	if len(names) == 0 {
		for _, svc := range v.Services {
			for _, p := range svc.Ports {
				names = append(names, gen.HostPort(svc.Hostname, p.Number))
			}
		}
	}
	out := make([]gen.Resource, 0, len(names))
	for _, name := range names {
		var l *listenerv3.Listener
		if addr, ok := gen.GRPCServerAddress(name); ok {
			l = grpcServerListener(v, name, addr)
		} else if svc, p, ok := v.ResolveTarget(name); ok {
			l = grpcClientListener(v, name, svc, p)
		}
		if l != nil {
			out = append(out, gen.Resource{Name: name, Resource: l})
		}
	}
	return out
}

// grpcClientListener is the API listener name of a client target: as
// istiod's grpcgen, the service's first address for this proxy (0.0.0.0
// when it has none) and port, and an HTTP connection manager with the fault
// filter (whether or not a route injects faults) and the router,
// fetching "outbound|PORT||HOST" over ADS. Its stat prefix, the
// listener's name, is not istiod's (none): Envoy's schema, which every
// output passes, requires one; gRPC reads none.
func grpcClientListener(v *scope.View, name string, svc *model.Service, p model.Port) *listenerv3.Listener {
	h := &hcmv3.HttpConnectionManager{
		StatPrefix: name,
		RouteSpecifier: &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{
			ConfigSource:    grpcRDSSource,
			RouteConfigName: gen.ClusterName(gen.Outbound, p.Number, "", svc.Hostname),
		}},
		HttpFilters: grpcClientFilters,
	}
	addr := "0.0.0.0" // gRPC reads no address of an API listener
	if as := scope.Addresses(v.Proxy, svc); len(as) > 0 {
		addr = as[0] // even a CIDR, as istiod's GetAddressForProxy
	}
	return &listenerv3.Listener{
		Name: name, Address: gen.SocketAddress(addr, p.Number),
		ApiListener: &listenerv3.ApiListener{ApiListener: gen.MustAny(h)},
	}
}

// Shared, never altered.
var (
	// grpcRDSSource is a proxyless client's RDS config source: bare ADS,
	// as istiod's grpcgen (gRPC reads neither an initial fetch timeout
	// nor the API version).
	grpcRDSSource = &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}}
	// grpcClientFilters are a proxyless client's HTTP filters: fault
	// injection (gRFC A33), whose per-route configs routes may carry,
	// then the router.
	grpcClientFilters = []*hcmv3.HttpFilter{sharedFault, sharedRouter}
)

// grpcServerListener is a proxyless server's inbound listener, nil when
// addr is no "IP:PORT". As istiod's grpcgen: one filter chain,
// "inbound-mtls" (the certificate provider instance "default" of the
// server's bootstrap, a client certificate required) when the port's
// PeerAuthentication is STRICT, or PERMISSIVE on a workload labelled
// security.istio.io/tlsMode=istio (its clients use mTLS; gRPC cannot
// serve both on one port), else "inbound-plaintext"; its connection
// manager "inbound-hcm<mode>" has the AuthorizationPolicies as HTTP
// RBAC filters before the router, which gRPC's xDS server enforces, and
// an inline route config "inbound" answering every RPC locally
// (non_forwarding_action), as gRPC requires. The connection manager's
// stat prefix "inbound_PORT" is required by Envoy's schema (istiod sets
// none; gRPC reads none).
//
// istiod answers only for a port where the proxy is a service's
// endpoint; ours for any port, so that a gRPC server no service selects
// (yet) serves, under the policies that select its workload, instead of
// waiting unserved for a listener.
func grpcServerListener(v *scope.View, name, addr string) *listenerv3.Listener {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return nil
	}
	port := uint32(ap.Port())
	mode := scope.PeerAuthnFor(v.Push, v.Proxy.Namespace, v.Proxy.Labels).PortMode(port)
	if mode == scope.MTLSPermissive && v.Proxy.Labels["security.istio.io/tlsMode"] == "istio" {
		mode = scope.MTLSStrict
	}
	suffix := "plaintext"
	var ts *corev3.TransportSocket
	if mode == scope.MTLSStrict {
		suffix = "mtls"
		ts = &corev3.TransportSocket{Name: "envoy.transport_sockets.tls", ConfigType: &corev3.TransportSocket_TypedConfig{
			TypedConfig: gen.MustAny(&tlsv3.DownstreamTlsContext{RequireClientCertificate: gen.Bool(true), CommonTlsContext: gen.GRPCTLSContext(nil)}),
		}}
	}
	h := &hcmv3.HttpConnectionManager{
		StatPrefix:     "inbound_" + strconv.Itoa(int(port)),
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: grpcInboundRoute(port)},
		HttpFilters:    []*hcmv3.HttpFilter{routerFilter()},
	}
	if pols := authz.For(v.Push, v.Proxy.Namespace, v.Proxy.Labels); !pols.Empty() {
		h.HttpFilters = append(grpcPolicyNames(pols.HTTPFilters()), h.HttpFilters...)
	}
	fc := &listenerv3.FilterChain{
		Name:            "inbound-" + suffix,
		Filters:         []*listenerv3.Filter{typedFilter("inbound-hcm"+suffix, h)},
		TransportSocket: ts,
	}
	return &listenerv3.Listener{
		Name: name, Address: gen.SocketAddress(ap.Addr().String(), port),
		FilterChains: []*listenerv3.FilterChain{fc},
	}
}

// grpcInboundRoute is a proxyless server's inline route config "inbound":
// every RPC answered by the server itself. Its virtual host is named
// "inbound|http|PORT" where istiod's has no name: Envoy's schema, which
// every output passes, requires one; gRPC reads none.
func grpcInboundRoute(port uint32) *routev3.RouteConfiguration {
	return &routev3.RouteConfiguration{Name: "inbound", VirtualHosts: []*routev3.VirtualHost{{
		Name: "inbound|http|" + strconv.Itoa(int(port)), Domains: []string{"*"},
		Routes: []*routev3.Route{{
			Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
			Action: &routev3.Route_NonForwardingAction{NonForwardingAction: &routev3.NonForwardingAction{}},
		}},
	}}}
}

// envoyPolicyName is the name authz gives the i-th rule of a policy,
// "ns[NS]-policy[NAME]-rule[I]".
var envoyPolicyName = regexp.MustCompile(`^ns\[([^\]]*)\]-policy\[([^\]]*)\]-rule\[([0-9]+)\]$`)

// grpcPolicyNames renames the rules of a proxyless server's RBAC filters
// as istiod's grpcgen names them, "NS-NAME-I" (Envoy's are named as
// istiod's RBAC builder names them). The names only label a rule; each
// filter is a new copy, filters is not altered.
func grpcPolicyNames(filters []*hcmv3.HttpFilter) []*hcmv3.HttpFilter {
	out := make([]*hcmv3.HttpFilter, 0, len(filters))
	for _, f := range filters {
		r := &rbachttpv3.RBAC{}
		if err := f.GetTypedConfig().UnmarshalTo(r); err != nil || len(r.GetRules().GetPolicies()) == 0 {
			out = append(out, f)
			continue
		}
		renamed := make(map[string]*rbacv3.Policy, len(r.Rules.Policies))
		for k, pol := range r.Rules.Policies {
			if m := envoyPolicyName.FindStringSubmatch(k); m != nil {
				k = m[1] + "-" + m[2] + "-" + m[3]
			}
			renamed[k] = pol
		}
		r.Rules.Policies = renamed
		out = append(out, &hcmv3.HttpFilter{Name: f.GetName(), ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: gen.MustAny(r)}})
	}
	return out
}
