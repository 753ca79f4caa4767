package bench

import (
	"fmt"
	"strings"
	"testing"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/gatewayapi"
	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/gentest"
)

// gatewayAPIRoutes is one Gateway API Gateway (one HTTP listener) with n
// HTTPRoutes, each with its own hostname, a path and a header match and
// a backend service of its own (n ServiceEntries): issue #28's measure.
// istio is the same routes written as an Istio Gateway and n
// VirtualServices, for comparison on the same run.
func gatewayAPIRoutes(n int, istio bool) string {
	var sb strings.Builder
	for i := range n {
		fmt.Fprintf(&sb, `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: svc-%d, namespace: default}
spec:
  hosts: [svc-%d.default.svc.cluster.local]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.%d.%d.1}]
---
`, i, i, i/250, i%250)
		if istio {
			fmt.Fprintf(&sb, `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: route-%d, namespace: default}
spec:
  hosts: [route-%d.example.com]
  gateways: [istio-system/gw]
  http:
  - match: [{uri: {prefix: /api}, headers: {x-tenant: {exact: t%d}}}]
    route: [{destination: {host: svc-%d.default.svc.cluster.local, port: {number: 80}}}]
---
`, i, i, i, i)
			continue
		}
		fmt.Fprintf(&sb, `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: route-%d, namespace: default}
spec:
  parentRefs: [{name: gw, namespace: istio-system}]
  hostnames: [route-%d.example.com]
  rules:
  - matches: [{path: {type: PathPrefix, value: /api}, headers: [{name: x-tenant, value: t%d}]}]
    backendRefs: [{name: svc-%d, port: 80}]
---
`, i, i, i, i)
	}
	if istio {
		sb.WriteString(`apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: gw, namespace: istio-system}
spec:
  selector: {gateway.networking.k8s.io/gateway-name: gw}
  servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: ["*/*"]}]
`)
	} else {
		sb.WriteString(`apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: istio-system}
spec:
  gatewayClassName: istio
  listeners: [{name: http, port: 80, protocol: HTTP, allowedRoutes: {namespaces: {from: All}}}]
`)
	}
	return sb.String()
}

func gatewayProxy(tb testing.TB) *model.Proxy {
	return gentest.ProxySpec{ID: "router~10.9.9.9~gw-1.istio-system~istio-system.svc.cluster.local",
		Labels: map[string]string{gatewayapi.GatewayNameLabel: "gw"}}.Proxy(tb)
}

// BenchmarkGatewayAPI1000Routes measures, for a gateway with 1,000
// HTTPRoutes: their conversion (what a snapshot build adds), and LDS, RDS
// and CDS generation for the gateway, beside the same for the routes
// written as VirtualServices ("istio-form"). kb/msg and resources/msg
// show both forms produce the same amount.
func BenchmarkGatewayAPI1000Routes(b *testing.B) {
	const n = 1000
	for _, form := range []string{"gatewayapi", "istio-form"} {
		pc := gentest.MustBuild(b, gatewayAPIRoutes(n, form == "istio-form"))
		if form == "gatewayapi" {
			b.Run(form+"/convert", func(b *testing.B) {
				in := gatewayapi.Input{
					Gateways: pc.Configs(config.KubernetesGateway), HTTPRoutes: pc.Configs(config.HTTPRoute),
					ServiceEntries: pc.Configs(config.ServiceEntry),
					HasService:     func(h, _ string) bool { return len(pc.ServicesByHost(h)) > 0 },
				}
				b.ReportAllocs()
				var out *gatewayapi.Output
				for b.Loop() {
					out = gatewayapi.Convert(in)
				}
				if len(out.VirtualServices) != n {
					b.Fatalf("%d virtual services, want %d", len(out.VirtualServices), n)
				}
			})
			// Again with the previous conversion's decoded specs, as a
			// snapshot build after a change converts.
			b.Run(form+"/convert-cached", func(b *testing.B) {
				in := gatewayapi.Input{
					Gateways: pc.Configs(config.KubernetesGateway), HTTPRoutes: pc.Configs(config.HTTPRoute),
					ServiceEntries: pc.Configs(config.ServiceEntry),
					HasService:     func(h, _ string) bool { return len(pc.ServicesByHost(h)) > 0 },
				}
				in.Cache = gatewayapi.Convert(in).Cache
				b.ReportAllocs()
				for b.Loop() {
					gatewayapi.Convert(in)
				}
			})
		}
		for _, typ := range []string{"LDS", "RDS", "CDS"} {
			b.Run(form+"/"+typ, func(b *testing.B) {
				measure(b, typ, gen.Input{Push: pc, Proxy: gatewayProxy(b)})
			})
		}
	}
}
