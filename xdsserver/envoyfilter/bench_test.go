package envoyfilter_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/xdsserver/envoyfilter"
	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/gentest"
	"github.com/baremesh/baremesh/xdsserver/xdstype"
)

// benchConfig is Istio's "http" benchmark config (100 HTTP services, as
// istiod's pilot/pkg/xds benchmark renders it).
const benchConfig = "../../../shared/bench/istio/http.yaml"

// hundredFilters are 100 EnvoyFilters in the root namespace, so every
// proxy gets them, one patch each, in turns: a Lua filter before every
// outbound router, a MERGE of every cluster's connect timeout, a header
// on every route configuration, a MERGE of every outbound listener.
func hundredFilters() string {
	var sb strings.Builder
	for i := range 100 {
		var patch string
		switch i % 4 {
		case 0:
			patch = fmt.Sprintf(`
  - applyTo: HTTP_FILTER
    match: {context: SIDECAR_OUTBOUND, listener: {filterChain: {filter: {name: envoy.filters.network.http_connection_manager, subFilter: {name: envoy.filters.http.router}}}}}
    patch:
      operation: INSERT_BEFORE
      value: {name: lua-%d, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua, default_source_code: {inline_string: "function envoy_on_request(h) end"}}}`, i)
		case 1:
			patch = fmt.Sprintf(`
  - applyTo: CLUSTER
    match: {context: SIDECAR_OUTBOUND}
    patch: {operation: MERGE, value: {connect_timeout: %ds}}`, 1+i%30)
		case 2:
			patch = fmt.Sprintf(`
  - applyTo: ROUTE_CONFIGURATION
    match: {context: SIDECAR_OUTBOUND}
    patch: {operation: MERGE, value: {request_headers_to_add: [{header: {key: x-ef-%d, value: "1"}}]}}`, i)
		case 3:
			patch = fmt.Sprintf(`
  - applyTo: LISTENER
    match: {context: SIDECAR_OUTBOUND}
    patch: {operation: MERGE, value: {per_connection_buffer_limit_bytes: %d}}`, 1024+i)
		}
		sb.WriteString(ef(fmt.Sprintf("ef-%03d", i), "istio-system", "  configPatches:"+patch))
	}
	return sb.String()
}

// BenchmarkGenerateWithFilters measures LDS, RDS and CDS for one sidecar
// of Istio's http benchmark: generation alone ("none"), and generation
// plus selecting and applying 100 EnvoyFilters that all apply to it
// ("100"), ValidateAll on each patched resource included. (Compiling the
// filters is once per snapshot, outside the loop, as in the builder.)
func BenchmarkGenerateWithFilters(b *testing.B) {
	data, err := os.ReadFile(benchConfig)
	if err != nil {
		b.Skip("no benchmark config: ", err)
	}
	for _, n := range []string{"none", "100"} {
		extra := ""
		if n == "100" {
			extra = hundredFilters()
		}
		pc := gentest.MustBuild(b, string(data), extra)
		p := node(b, "sidecar~1.1.1.1~v0.default~default.svc.cluster.local", map[string]string{"istio.io/benchmark": "true"}, nil)
		set := envoyfilter.Compile(pc.Configs(config.EnvoyFilter), pc.Mesh.GetRootNamespace())
		if len(set.Problems()) > 0 {
			b.Fatal(set.Problems())
		}
		for _, ty := range []*xdstype.Type{xdstype.Listener, xdstype.Route, xdstype.Cluster} {
			b.Run(ty.Short+"/"+n, func(b *testing.B) {
				in := gen.Input{Push: pc, Proxy: p}
				if ty == xdstype.Route {
					ls, err := xdstype.Listener.Generate(in)
					if err != nil {
						b.Fatal(err)
					}
					in.Names = gentest.RouteNames(ls)
				}
				b.ReportAllocs()
				patched := 0
				for b.Loop() {
					res, err := ty.Generate(in)
					if err != nil {
						b.Fatal(err)
					}
					if n != "none" {
						out, problems := envoyfilter.Apply(ty.URL, res, p, set.Select(p))
						if len(problems) > 0 {
							b.Fatal(problems)
						}
						patched = len(out)
					}
				}
				b.ReportMetric(float64(patched), "resources/msg")
			})
		}
	}
}
