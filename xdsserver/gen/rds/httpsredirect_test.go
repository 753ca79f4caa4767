package rds

import (
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/gentest"
)

// TestHTTPSRedirect: an HTTP server with tls.httpsRedirect makes its
// virtual hosts require TLS (Envoy answers plain HTTP with a redirect),
// a host with routes and one without alike, as istiod. Before, the
// setting was ignored and plain HTTP was served.
func TestHTTPSRedirect(t *testing.T) {
	pc := gentest.MustBuild(t, `
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: gw, namespace: default}
spec:
  selector: {istio: ingressgateway}
  servers:
  - port: {number: 80, name: http, protocol: HTTP}
    hosts: [shop.example.com, bare.example.com]
    tls: {httpsRedirect: true}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: shop, namespace: default}
spec:
  hosts: [shop.example.com]
  gateways: [gw]
  http: [{route: [{destination: {host: shop.default.svc.cluster.local, port: {number: 80}}}]}]
`)
	p := gentest.ProxySpec{ID: "router~10.1.1.2~gw.default~default.svc.cluster.local", Labels: map[string]string{"istio": "ingressgateway"}}.Proxy(t)
	res := gentest.Run(t, Generate, gen.Input{Push: pc, Proxy: p, Names: []string{"http.80"}})
	got := map[string]routev3.VirtualHost_TlsRequirementType{}
	for _, vh := range res[0].Resource.(*routev3.RouteConfiguration).GetVirtualHosts() {
		got[vh.GetName()] = vh.GetRequireTls()
	}
	for _, h := range []string{"shop.example.com:80", "bare.example.com:80"} {
		if r, ok := got[h]; !ok || r != routev3.VirtualHost_ALL {
			t.Errorf("%s: present %v, require_tls %v; want ALL (virtual hosts %v)", h, ok, r, got)
		}
	}
}
