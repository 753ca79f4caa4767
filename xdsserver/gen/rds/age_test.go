package rds

import (
	"slices"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/baremesh/baremesh/core/push"
	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/gentest"
)

// ageGateway is a gateway on port 80 for every host.
const ageGateway = `
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: gw, namespace: ns}
spec:
  selector: {istio: ingressgateway}
  servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: ["*"]}]
---
`

// ageConfig has two VirtualServices for serviceA's host, on the mesh and
// on a gateway, whose creation order is the reverse of their name order.
const ageConfig = ageGateway + `
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: first-by-name, namespace: ns, creationTimestamp: "2024-02-01T00:00:00Z"}
spec:
  hosts: [a.ns.svc.cluster.local]
  gateways: [mesh, gw]
  http: [{name: newer, match: [{uri: {prefix: /newer}}], route: [{destination: {host: a.ns.svc.cluster.local}}]}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: second-by-name, namespace: ns, creationTimestamp: "2024-01-01T00:00:00Z"}
spec:
  hosts: [a.ns.svc.cluster.local]
  gateways: [mesh, gw]
  http: [{name: older, match: [{uri: {prefix: /older}}], route: [{destination: {host: a.ns.svc.cluster.local}}]}]
`

// TestOldestVirtualServiceFirst: where two VirtualServices claim a host,
// a sidecar takes the oldest one's routes only, and a gateway merges both
// oldest first, as istiod orders them (creation time, then name), not by
// name.
func TestOldestVirtualServiceFirst(t *testing.T) {
	pc := gentest.MustBuild(t, serviceA, ageConfig)
	routes := func(id, rc, vhost string) []string { return routeNames(t, pc, id, rc, vhost) }
	if got := routes("sidecar~10.1.1.1~p.ns~ns.svc.cluster.local", "80", "a.ns.svc.cluster.local:80"); len(got) != 1 || got[0] != "older" {
		t.Errorf("sidecar routes %v, want the oldest VirtualService's (older) only", got)
	}
	if got := routes("router~10.1.1.2~gw.ns~ns.svc.cluster.local", "http.80", "a.ns.svc.cluster.local:80"); len(got) != 2 || got[0] != "older" || got[1] != "newer" {
		t.Errorf("gateway routes %v, want [older newer]", got)
	}
}

// TestGatewayCatchAllLast: on a gateway, the older VirtualService's
// catch-all goes after the newer one's routes on the host they share,
// as istiod's SortVHostRoutes (it hid them: two HTTPRoutes on one
// listener created a second apart, in the parity scenario
// gatewayapi/http).
func TestGatewayCatchAllLast(t *testing.T) {
	pc := gentest.MustBuild(t, serviceA, ageGateway+`
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: older, namespace: ns, creationTimestamp: "2024-01-01T00:00:00Z"}
spec:
  hosts: [a.ns.svc.cluster.local]
  gateways: [gw]
  http:
  - {name: get, match: [{uri: {prefix: /get}}], route: [{destination: {host: a.ns.svc.cluster.local}}]}
  - {name: all, route: [{destination: {host: a.ns.svc.cluster.local}}]}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: newer, namespace: ns, creationTimestamp: "2024-02-01T00:00:00Z"}
spec:
  hosts: [a.ns.svc.cluster.local]
  gateways: [gw]
  http: [{name: other, match: [{uri: {prefix: /other}}], route: [{destination: {host: a.ns.svc.cluster.local}}]}]
`)
	names := routeNames(t, pc, "router~10.1.1.2~gw.ns~ns.svc.cluster.local", "http.80", "a.ns.svc.cluster.local:80")
	if want := []string{"get", "other", "all"}; !slices.Equal(names, want) {
		t.Errorf("gateway routes %v, want %v", names, want)
	}
}

// routeNames is the names of the routes of virtual host vhost in route
// configuration rc, generated for the proxy id (labelled as the ingress
// gateway).
func routeNames(t *testing.T, pc *push.PushContext, id, rc, vhost string) []string {
	t.Helper()
	p := gentest.ProxySpec{ID: id, Labels: map[string]string{"istio": "ingressgateway"}}.Proxy(t)
	res := gentest.Run(t, Generate, gen.Input{Push: pc, Proxy: p, Names: []string{rc}})
	if len(res) != 1 {
		t.Fatalf("%s: %d route configs, want 1", rc, len(res))
	}
	var names []string
	for _, vh := range res[0].Resource.(*routev3.RouteConfiguration).GetVirtualHosts() {
		if vh.GetName() == vhost {
			for _, r := range vh.GetRoutes() {
				names = append(names, r.GetName())
			}
		}
	}
	return names
}
