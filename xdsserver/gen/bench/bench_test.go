package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/core/push"
	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/cds"
	"github.com/baremesh/baremesh/xdsserver/gen/gentest"
	"github.com/baremesh/baremesh/xdsserver/gen/lds"
	"github.com/baremesh/baremesh/xdsserver/gen/rds"
)

// benchDir holds Istio's benchmark configs, relative to this package.
const benchDir = "../../../../shared/bench/istio"

// types per case, as the README lists what istiod measures.
func typesFor(name string) []string {
	switch name {
	case "tcp", "tls":
		return []string{"CDS", "LDS"}
	case "strict", "disabled", "authorizationpolicy":
		return []string{"LDS"}
	}
	return []string{"CDS", "LDS", "RDS"}
}

// proxyFor is the proxy istiod's benchmark generates for: IP 1.1.1.1,
// namespace default, labels istio.io/benchmark=true; a router for the
// gateway cases.
func proxyFor(tb testing.TB, name string) *model.Proxy {
	typ := "sidecar"
	if strings.Contains(name, "gateway") {
		typ = "router"
	}
	spec := gentest.ProxySpec{ID: typ + "~1.1.1.1~v0.default~default.svc.cluster.local", Labels: map[string]string{"istio.io/benchmark": "true"}}
	if os.Getenv("BENCH_ISTIO_PROXY") != "" {
		// As Istio's agent describes itself: istio-proxy, which gets
		// Istio's telemetry (#27).
		spec.Metadata = map[string]string{"ISTIO_VERSION": "1.31.0"}
	}
	return spec.Proxy(tb)
}

// generators are the types measured, by name.
var generators = map[string]gen.Generator{"LDS": lds.Generate, "RDS": rds.Generate, "CDS": cds.Generate}

// measure times the generator of typ on in (for RDS, in.Names are the
// route names LDS produces for in) and reports kb/msg and resources/msg
// (the size of one response) beside time and allocations.
func measure(b *testing.B, typ string, in gen.Input) {
	b.Helper()
	g := generators[typ]
	if typ == "RDS" {
		ls, err := lds.Generate(in)
		if err != nil {
			b.Fatal(err)
		}
		in.Names = gentest.RouteNames(ls)
	}
	res, err := g(in)
	if err != nil {
		b.Fatal(err)
	}
	size := 0
	for _, r := range res {
		size += proto.Size(gen.MustAny(r.Resource))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := g(in); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(size)/1024, "kb/msg")
	b.ReportMetric(float64(len(res)), "resources/msg")
}

// BenchmarkGenerate measures LDS, RDS and CDS generation per case; RDS
// asks for the route names LDS produced. It reports kb/msg and
// resources/msg (the size of one response) beside time and allocations.
func BenchmarkGenerate(b *testing.B) {
	files, _ := filepath.Glob(filepath.Join(benchDir, "*.yaml"))
	if len(files) == 0 {
		b.Skip("no benchmark configs in " + benchDir)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".yaml")
		data, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		var pc *push.PushContext
		setup := func(b *testing.B) *push.PushContext {
			if pc == nil {
				if pc, err = gentest.Build(data); err != nil {
					b.Fatalf("%s: %v", name, err)
				}
			}
			return pc
		}
		for _, typ := range typesFor(name) {
			b.Run(name+"/"+typ, func(b *testing.B) {
				measure(b, typ, gen.Input{Push: setup(b), Proxy: proxyFor(b, name)})
			})
		}
	}
}
