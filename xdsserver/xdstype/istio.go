package xdstype

import (
	"strings"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/xdsserver/gen/istioconfig"
)

// IstioConfig are the Istio config types, served over MCP-over-xDS to an
// istiod whose meshConfig.configSources names baremeshd: one per kind
// baremesh reads, at its v1 storage version (what istiod asks for), with
// the aggregate's configs of that kind; and, empty, the other kinds
// istiod's config source client subscribes to and waits for before it
// reports synced.
var IstioConfig = func() []*Type {
	var out []*Type
	for i, k := range config.Kinds() {
		s := config.SchemaFor(k)
		t := &Type{
			URL: s.GVK().String(), Short: "mcp-" + strings.ToLower(string(k)),
			Generate: istioconfig.For(k), Order: 10 + i, Wildcard: true,
			Affects: map[config.Kind]Reach{k: Everyone},
			// Kinds that feed the model and change endpoints only
			// come as endpoint pushes.
			Endpoints: k.FeedsModel(),
		}
		out = append(out, t)
	}
	for i, u := range []string{
		"networking.istio.io/v1alpha3/EnvoyFilter", "networking.istio.io/v1beta1/ProxyConfig",
		"security.istio.io/v1/RequestAuthentication", "telemetry.istio.io/v1/Telemetry",
		"extensions.istio.io/v1alpha1/WasmPlugin", "extensions.istio.io/v1alpha1/TrafficExtension",
	} {
		out = append(out, &Type{URL: u, Short: "mcp-" + strings.ToLower(u[strings.LastIndexByte(u, '/')+1:]),
			Generate: istioconfig.None, Order: 30 + i, Wildcard: true})
	}
	return out
}()
