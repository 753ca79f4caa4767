package rds

import (
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/gentest"
)

// TestVirtualServiceWithoutHTTPRoutesKeepsDefault: a VirtualService for
// a host with only tls:/tcp: routes (or HTTP routes for another port)
// leaves the host's HTTP port its default route, as istiod does; it
// gave a virtual host with no routes (404 for every request).
func TestVirtualServiceWithoutHTTPRoutesKeepsDefault(t *testing.T) {
	const cfg = `
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: a, namespace: ns}
spec:
  hosts: [a.ns.svc.cluster.local]
  ports: [{number: 80, name: http, protocol: HTTP}, {number: 443, name: tls, protocol: TLS}, {number: 9000, name: tcp, protocol: TCP}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.1}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: a, namespace: ns}
spec:
  hosts: [a.ns.svc.cluster.local]
  tls:
  - match: [{port: 443, sniHosts: [a.ns.svc.cluster.local]}]
    route: [{destination: {host: a.ns.svc.cluster.local, port: {number: 443}}}]
  tcp:
  - match: [{port: 9000}]
    route: [{destination: {host: a.ns.svc.cluster.local, port: {number: 9000}}}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: b, namespace: ns}
spec:
  hosts: [b.ns.svc.cluster.local]
  http:
  - match: [{port: 8080}]
    route: [{destination: {host: b.ns.svc.cluster.local}}]
`
	pc := gentest.MustBuild(t, cfg, serviceB)
	check := func(t *testing.T, meta map[string]string, names ...string) {
		proxy := gentest.Node(t, "sidecar~10.1.1.1~p.ns~ns.svc.cluster.local", meta)
		res := gentest.Run(t, Generate, gen.Input{Push: pc, Proxy: proxy, Names: names})
		found := map[string]bool{}
		for _, r := range res {
			for _, vh := range r.Resource.(*routev3.RouteConfiguration).GetVirtualHosts() {
				for _, host := range []string{"a", "b"} {
					name := host + ".ns.svc.cluster.local:80"
					if vh.GetName() != name {
						continue
					}
					found[host] = true
					cluster := "outbound|80||" + host + ".ns.svc.cluster.local"
					if len(vh.GetRoutes()) != 1 || vh.GetRoutes()[0].GetRoute().GetCluster() != cluster {
						t.Errorf("%s: virtual host %s has routes %v, want the default route to %s", r.Name, name, vh.GetRoutes(), cluster)
					}
				}
			}
		}
		if !found["a"] || !found["b"] {
			t.Errorf("virtual hosts found: %v, want a and b", found)
		}
	}
	t.Run("sidecar", func(t *testing.T) {
		check(t, nil, "80")
	})
	t.Run("proxyless", func(t *testing.T) {
		check(t, map[string]string{"GENERATOR": "grpc"}, "outbound|80||a.ns.svc.cluster.local", "outbound|80||b.ns.svc.cluster.local")
	})
}
