package rds

import (
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/gentest"
)

// TestMatchGatewayShortName: a route match's gateways name Gateways as
// the VirtualService's gateways do (istiod's resolveGatewayName: a short
// name is the VirtualService's namespace's), so Istio's egress task,
// whose gateway rule says `gateways: [istio-egressgateway]`, routes on
// the gateway and its mesh rule stays off it. Before, a short name never
// matched and the gateway had no virtual host for the host.
func TestMatchGatewayShortName(t *testing.T) {
	pc := gentest.MustBuild(t, `
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: istio-egressgateway, namespace: default}
spec:
  selector: {istio: egressgateway}
  servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: [edition.cnn.com]}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: cnn, namespace: default}
spec:
  hosts: [edition.cnn.com]
  gateways: [istio-egressgateway, mesh]
  http:
  - match: [{gateways: [mesh], port: 80}]
    route: [{destination: {host: istio-egressgateway.istio-system.svc.cluster.local, port: {number: 80}}}]
  - match: [{gateways: [istio-egressgateway], port: 80}]
    route: [{destination: {host: edition.cnn.com, port: {number: 443}}}]
`)
	p := gentest.ProxySpec{ID: "router~10.1.1.2~egress.istio-system~istio-system.svc.cluster.local", Labels: map[string]string{"istio": "egressgateway"}}.Proxy(t)
	res := gentest.Run(t, Generate, gen.Input{Push: pc, Proxy: p, Names: []string{"http.80"}})
	if len(res) != 1 {
		t.Fatalf("%d route configs, want 1", len(res))
	}
	var routes []*routev3.Route
	for _, vh := range res[0].Resource.(*routev3.RouteConfiguration).GetVirtualHosts() {
		if vh.GetName() == "edition.cnn.com:80" {
			routes = vh.GetRoutes()
		}
	}
	if len(routes) != 1 || routes[0].GetRoute().GetCluster() != "outbound|443||edition.cnn.com" {
		t.Fatalf("edition.cnn.com:80 routes %v, want the gateway rule's only", routes)
	}
}
