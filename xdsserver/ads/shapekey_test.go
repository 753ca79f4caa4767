package ads

import (
	"fmt"
	"sync/atomic"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/cds"
	"github.com/baremesh/baremesh/xdsserver/gen/eds"
	"github.com/baremesh/baremesh/xdsserver/gen/gentest"
	"github.com/baremesh/baremesh/xdsserver/gen/lds"
	"github.com/baremesh/baremesh/xdsserver/gen/rds"
	"github.com/baremesh/baremesh/xdsserver/xdstype"
)

// TestShapeCacheSharesAcrossServiceClusters (issue #30): istio-proxy
// sidecars whose agent names the node's cluster after the pod (one
// service cluster per proxy) share one CDS, LDS and RDS generation per
// snapshot: only an OpenTelemetry tracer reads the service cluster, and
// only in LDS. Before, each proxy generated its own CDS and RDS on every
// full push (10 ms of server CPU per proxy at 1,000 services). With the
// assertion on, every hit is checked against the real proxy's output.
func TestShapeCacheSharesAcrossServiceClusters(t *testing.T) {
	pc, err := gentest.Build([]byte(`
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: web, namespace: ns}
spec:
  hosts: [web.example.com]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.1.0.1}]
---
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: default, namespace: istio-system}
spec: {mtls: {mode: STRICT}}
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, assert := range []bool{false, true} {
		t.Run(fmt.Sprintf("assert=%v", assert), func(t *testing.T) {
			if !assert {
				t.Setenv("BAREMESH_CACHE_ASSERT", "0") // the assertion would regenerate
			}
			var gens [3]atomic.Int64
			count := func(i int, g gen.Generator) gen.Generator {
				return func(in gen.Input) ([]gen.Resource, error) { gens[i].Add(1); return g(in) }
			}
			client, mm := cachedServer(t, pc, assert, map[*xdstype.Type]gen.Generator{
				xdstype.Cluster: count(0, cds.Generate), xdstype.Listener: count(1, lds.Generate), xdstype.Route: count(2, rds.Generate)})
			for i := range 5 {
				node := istioSidecar(t, i)
				for _, typ := range []struct {
					url   string
					names []string
				}{{xdstype.Cluster.URL, nil}, {xdstype.Listener.URL, nil}, {xdstype.Route.URL, []string{"80"}}} {
					r := ask(t, client, node, typ.url, typ.names...)
					if len(r.GetResources()) == 0 {
						t.Fatalf("%s: no resources for %s", typ.url, node.GetId())
					}
				}
			}
			if m := mm.list(); len(m) != 0 {
				t.Fatalf("cache assertion: %v", m)
			}
			if assert {
				return
			}
			for i, name := range []string{"CDS", "LDS", "RDS"} {
				if g := gens[i].Load(); g != 1 {
					t.Errorf("5 istio-proxy sidecars with their own service cluster: %d %s generations, want 1", g, name)
				}
			}
		})
	}
}

// istioSidecar is sidecar i as Istio's agent describes it, with the
// node's cluster (the service cluster) named after its pod.
func istioSidecar(t *testing.T, i int) *corev3.Node {
	t.Helper()
	name := fmt.Sprintf("web-%d", i)
	md, err := structpb.NewStruct(map[string]any{
		"ISTIO_VERSION": "1.31.0", "NAMESPACE": "ns", "CLUSTER_ID": "Kubernetes", "MESH_ID": "cluster.local",
		"WORKLOAD_NAME": name, "INSTANCE_IPS": fmt.Sprintf("10.0.0.%d", i+1), "LABELS": map[string]any{"app": "web"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return &corev3.Node{Id: fmt.Sprintf("sidecar~10.0.0.%d~%s.ns~ns.svc.cluster.local", i+1, name), Cluster: name + ".ns", Metadata: md}
}

// TestWildcardEDSSharedAcrossStreams (issue #30): streams that ask EDS
// for everything (no names) share one generation per key and endpoint
// generation; before, each stream generated every CLA on every push (100
// such streams beside a 50,000-endpoint service: 100 generations of it
// per push, and 100 copies held). With the assertion on, a hit is checked
// against the real proxy's output.
func TestWildcardEDSSharedAcrossStreams(t *testing.T) {
	pc, err := gentest.Build([]byte(`
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: web, namespace: ns}
spec:
  hosts: [web.example.com]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.1.0.1}, {address: 10.1.0.2}]
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, assert := range []bool{false, true} {
		t.Run(fmt.Sprintf("assert=%v", assert), func(t *testing.T) {
			if !assert {
				t.Setenv("BAREMESH_CACHE_ASSERT", "0") // the assertion would regenerate
			}
			var gens atomic.Int64
			client, mm := cachedServer(t, pc, assert, map[*xdstype.Type]gen.Generator{xdstype.Endpoint: func(in gen.Input) ([]gen.Resource, error) {
				gens.Add(1)
				return eds.Generate(in)
			}})
			for i := range 5 {
				r := ask(t, client, istioSidecar(t, i), xdstype.Endpoint.URL)
				if len(r.GetResources()) != 1 {
					t.Fatalf("wildcard EDS: %d resources, want 1 (web's port 80)", len(r.GetResources()))
				}
			}
			if m := mm.list(); len(m) != 0 {
				t.Fatalf("cache assertion: %v", m)
			}
			if g := gens.Load(); !assert && g != 1 {
				t.Errorf("5 wildcard EDS streams of one key: %d generations, want 1", g)
			}
		})
	}
}
