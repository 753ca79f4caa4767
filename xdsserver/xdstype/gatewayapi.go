package xdstype

import "github.com/baremesh/baremesh/core/config"

// The Gateway API kinds reach the generators as the Gateways and
// VirtualServices core/push converts them to (core/gatewayapi): a change
// of one regenerates what those kinds feed, for every proxy (a route may
// bind to gateways or, through a Service parent, to sidecars).
func init() {
	for _, k := range []config.Kind{config.GatewayClass, config.KubernetesGateway, config.HTTPRoute, config.GRPCRoute,
		config.TCPRoute, config.TLSRoute, config.ReferenceGrant, config.BackendTLSPolicy, config.ListenerSet} {
		for _, t := range []*Type{Cluster, Listener, Route, Secret} {
			t.Affects[k] = Everyone
		}
	}
}
