package istioconfig_test

import (
	"testing"
	"time"

	mcpapi "istio.io/api/mcp/v1alpha1"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/config/configtest"
	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/core/push"
	"github.com/baremesh/baremesh/core/store"
	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/istioconfig"
)

// TestVirtualServicesAsMCPResources: each config of the kind is one
// istio.mcp.v1alpha1.Resource named ns/name, labels kept, the spec as
// body; a named subscription gets only its names.
func TestVirtualServicesAsMCPResources(t *testing.T) {
	mem := store.NewMemory()
	for _, m := range []string{`apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: a, namespace: ns1, labels: {app: a}}
spec: {hosts: [a.mesh], http: [{route: [{destination: {host: a.mesh}}]}]}
`, `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: b, namespace: ns2}
spec: {hosts: [b.mesh], http: [{route: [{destination: {host: b.mesh}}]}]}
`} {
		mem.Apply([]config.Config{configtest.Typed(t, m)}, nil)
	}
	pc := push.Build(nil, push.Inputs{Store: mem, Registry: model.NewRegistry(model.NewAllocator()), Mesh: config.DefaultMeshConfig()}, nil, time.Now())
	g := istioconfig.For(config.VirtualService)
	out, err := g(gen.Input{Push: pc, Proxy: &model.Proxy{}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 2 || out[0].Name != "ns1/a" || out[1].Name != "ns2/b" {
		t.Fatalf("resources = %v", out)
	}
	r := out[0].Resource.(*mcpapi.Resource)
	var vs networking.VirtualService
	if err := r.GetBody().UnmarshalTo(&vs); err != nil {
		t.Fatal(err)
	}
	if r.GetMetadata().GetName() != "ns1/a" || r.GetMetadata().GetLabels()["app"] != "a" || vs.GetHosts()[0] != "a.mesh" {
		t.Fatalf("resource = %v", r)
	}
	named, _ := g(gen.Input{Push: pc, Proxy: &model.Proxy{}, Names: []string{"ns2/b"}})
	if len(named) != 1 || named[0].Name != "ns2/b" {
		t.Fatalf("named subscription got %v", named)
	}
	if none, _ := istioconfig.For(config.Gateway)(gen.Input{Push: pc, Proxy: &model.Proxy{}}); len(none) != 0 {
		t.Fatalf("gateways = %v", none)
	}
}
