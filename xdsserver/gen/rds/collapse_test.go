package rds

import (
	"slices"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/gentest"
)

// TestGatewayHostsCollapse: on a gateway, hosts whose routes are the same
// share one virtual host (named after the most specific: longest, then
// alphabetical), as istiod's collapseDuplicateRoutes; a host with other
// routes keeps its own.
func TestGatewayHostsCollapse(t *testing.T) {
	pc := gentest.MustBuild(t, `
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: gw, namespace: ns}
spec:
  selector: {istio: ingressgateway}
  servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: ["*"]}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: a, namespace: ns}
spec:
  hosts: [b.example.com, a.example.com, longer.example.com, "*.other.com"]
  gateways: [gw]
  http: [{route: [{destination: {host: svc.example.com, port: {number: 80}}}]}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: c, namespace: ns}
spec:
  hosts: [c.example.com]
  gateways: [gw]
  http: [{route: [{destination: {host: svc.example.com, port: {number: 80}}}]}]
`)
	p := gentest.ProxySpec{ID: "router~10.1.1.2~gw.ns~ns.svc.cluster.local", Labels: map[string]string{"istio": "ingressgateway"}}.Proxy(t)
	res := gentest.Run(t, Generate, gen.Input{Push: pc, Proxy: p, Names: []string{"http.80"}})
	if len(res) != 1 {
		t.Fatalf("%d route configs, want 1", len(res))
	}
	got := map[string][]string{}
	for _, vh := range res[0].Resource.(*routev3.RouteConfiguration).GetVirtualHosts() {
		got[vh.GetName()] = vh.GetDomains()
	}
	want := map[string][]string{
		"longer.example.com:80": {"longer.example.com", "a.example.com", "b.example.com", "*.other.com"},
		"c.example.com:80":      {"c.example.com"},
	}
	if len(got) != len(want) {
		t.Fatalf("virtual hosts %v, want %v", got, want)
	}
	for name, d := range want {
		if !slices.Equal(got[name], d) {
			t.Errorf("%s: domains %v, want %v", name, got[name], d)
		}
	}
}
