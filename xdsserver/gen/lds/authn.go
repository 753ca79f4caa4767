package lds

import (
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"

	"github.com/baremesh/baremesh/xdsserver/gen/authz"
	"github.com/baremesh/baremesh/xdsserver/gen/scope"
)

// securityFilters are the filters that enforce the workload's security
// policies on its inbound (sidecar) or server (gateway) side, in
// istiod's order: for HTTP, CUSTOM's RBAC+ext_authz pairs, the
// jwt_authn filter of its RequestAuthentications, then the RBAC filters
// (AUDIT, DENY, ALLOW), all before the other HTTP filters; for TCP,
// CUSTOM's pairs (gRPC providers only) then the network RBAC filters,
// before tcp_proxy. Both are nil when no policy selects the workload.
func securityFilters(v *scope.View, gateway bool) (http []*hcmv3.HttpFilter, tcp []*listenerv3.Filter) {
	pols := authz.For(v.Push, v.Proxy.Namespace, v.Proxy.Labels)
	if !pols.Empty() {
		http, tcp = pols.CustomHTTPFilters(v.Push), pols.CustomNetworkFilters(v.Push)
	}
	if f := authz.JWTFilter(v.Push, v.Proxy.Namespace, v.Proxy.Labels, gateway); f != nil {
		http = append(http, f)
	}
	if !pols.Empty() {
		http, tcp = append(http, pols.EnvoyHTTPFilters()...), append(tcp, pols.NetworkFilters()...)
	}
	return http, tcp
}
