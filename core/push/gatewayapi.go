package push

import (
	"cmp"
	"slices"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/gatewayapi"
)

// gatewayAPIKinds are the Kubernetes Gateway API kinds, converted to
// Gateways and VirtualServices when a snapshot is built.
var gatewayAPIKinds = []config.Kind{
	config.GatewayClass, config.KubernetesGateway, config.HTTPRoute, config.GRPCRoute,
	config.TCPRoute, config.TLSRoute, config.ReferenceGrant, config.BackendTLSPolicy, config.ListenerSet,
}

// gatewayAPIState is a snapshot's conversion: its output and the
// Gateways and VirtualServices as the store holds them (the snapshot's
// indexes of those kinds hold both).
type gatewayAPIState struct {
	out *gatewayapi.Output
	raw map[config.Kind]*kindIndex
}

// convertGatewayAPI merges the conversion of the Gateway API kinds into
// pc's Gateways and VirtualServices, converting again only when an input
// changed (a Gateway API kind, the services, the ServiceEntries).
func (pc *PushContext) convertGatewayAPI(prev *PushContext, changed *Changed) {
	raw := map[config.Kind]*kindIndex{config.Gateway: pc.kinds[config.Gateway], config.VirtualService: pc.kinds[config.VirtualService],
		config.DestinationRule: pc.kinds[config.DestinationRule]}
	var prevState *gatewayAPIState
	if prev != nil {
		prevState = prev.gatewayAPI
	}
	if prevState != nil {
		for k := range raw {
			if raw[k] == prev.kinds[k] {
				raw[k] = prevState.raw[k] // reused: prev's index held the merge
			}
		}
	}
	need := prevState == nil || changed == nil || changed.Services || changed.Kinds[config.ServiceEntry]
	for _, k := range gatewayAPIKinds {
		need = need || changed.Kinds[k]
	}
	var out *gatewayapi.Output
	if need {
		var cache *gatewayapi.Cache
		if prevState != nil {
			cache = prevState.out.Cache
		}
		out = gatewayapi.Convert(gatewayapi.Input{
			Cache:   cache,
			Classes: pc.Configs(config.GatewayClass), Gateways: pc.Configs(config.KubernetesGateway),
			HTTPRoutes: pc.Configs(config.HTTPRoute), GRPCRoutes: pc.Configs(config.GRPCRoute),
			TCPRoutes: pc.Configs(config.TCPRoute), TLSRoutes: pc.Configs(config.TLSRoute),
			Grants: pc.Configs(config.ReferenceGrant), ServiceEntries: pc.Configs(config.ServiceEntry),
			BackendTLSPolicies: pc.Configs(config.BackendTLSPolicy), ListenerSets: pc.Configs(config.ListenerSet),
			HasService: func(host, _ string) bool { return len(pc.services.byHost[host]) > 0 },
		})
	} else {
		out = prevState.out
	}
	pc.gatewayAPI = &gatewayAPIState{out: out, raw: raw}
	pc.kinds[config.Gateway] = mergeIndex(raw[config.Gateway], out.Gateways)
	pc.kinds[config.VirtualService] = mergeIndex(raw[config.VirtualService], out.VirtualServices)
	pc.kinds[config.DestinationRule] = mergeIndex(raw[config.DestinationRule], out.DestinationRules)
}

// mergeIndex is ix with extra added (ix itself when extra is empty).
func mergeIndex(ix *kindIndex, extra []config.Config) *kindIndex {
	if len(extra) == 0 {
		return ix
	}
	var all []config.Config
	if ix != nil {
		all = slices.Clone(ix.all)
	}
	all = append(all, extra...)
	slices.SortStableFunc(all, func(a, b config.Config) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return buildKind(all)
}

// GatewayAPIStatus returns the status computed for every Gateway API
// object of the snapshot, by key. The map must not be altered.
func (pc *PushContext) GatewayAPIStatus() map[config.Key]*gatewayapi.Status {
	if pc.gatewayAPI == nil {
		return nil
	}
	return pc.gatewayAPI.out.Status
}

// SourceConfigs returns the configs of kind as the sources hold them:
// Configs without the Gateways and VirtualServices converted from the
// Gateway API (what downstream MCP serves).
func (pc *PushContext) SourceConfigs(kind config.Kind) []config.Config {
	if pc.gatewayAPI != nil {
		if ix, ok := pc.gatewayAPI.raw[kind]; ok {
			if ix == nil {
				return nil
			}
			return ix.all
		}
	}
	return pc.Configs(kind)
}
