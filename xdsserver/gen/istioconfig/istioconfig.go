// Package istioconfig generates Istio config as MCP-over-xDS resources:
// what an istiod whose meshConfig.configSources points at baremeshd
// (xds://HOST:PORT) reads. Each config of a kind becomes one
// istio.mcp.v1alpha1.Resource named "namespace/name" (metadata: labels,
// annotations, resource version; body: the spec), as istiod's own API
// generator sends it, so a consumer sees the aggregate of every source
// (files, MCP upstreams, clusters, auto-registered WorkloadEntries).
// Each carries a content version and its creation time, as istiod's own
// MCP server sends them.
//
// Like every generator it is pure and imports core only.
package istioconfig

import (
	"fmt"
	"slices"

	mcpapi "istio.io/api/mcp/v1alpha1"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/xdsserver/gen"
)

// For returns the generator of kind's resources. The output is the same
// for every proxy.
func For(kind config.Kind) gen.Generator {
	return func(in gen.Input) ([]gen.Resource, error) {
		if in.Push == nil {
			return nil, nil
		}
		cs := in.Push.SourceConfigs(kind) // not the Gateway API conversion
		out := make([]gen.Resource, 0, len(cs))
		for i := range cs {
			c := &cs[i]
			name := c.Namespace + "/" + c.Name
			if len(in.Names) > 0 && !slices.Contains(in.Names, name) {
				continue
			}
			r, err := Resource(c)
			if err != nil {
				return nil, fmt.Errorf("istioconfig %s: %w", kind, err)
			}
			out = append(out, gen.Resource{Name: name, Resource: r})
		}
		return out, nil
	}
}

// None generates nothing: for the Istio kinds baremesh does not read,
// which istiod's config source client waits for all the same.
func None(gen.Input) ([]gen.Resource, error) { return nil, nil }

// Resource wraps one config as istiod's API generator does (see encode
// for its version and creation time).
func Resource(c *config.Config) (*mcpapi.Resource, error) {
	md, body, err := encode(c)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.Key(), err)
	}
	return &mcpapi.Resource{Metadata: md, Body: body}, nil
}
