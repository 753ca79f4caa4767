package scope_test

import (
	"testing"

	"github.com/baremesh/baremesh/xdsserver/gen/gentest"
	"github.com/baremesh/baremesh/xdsserver/gen/scope"
)

// TestGatewayAPIGatewayBindsItsNamespace: a Gateway converted from the
// Gateway API binds a proxy with its gateway-name label in its own
// namespace only; an Istio Gateway's selector binds in any namespace.
func TestGatewayAPIGatewayBindsItsNamespace(t *testing.T) {
	pc := gentest.MustBuild(t, `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: edge}
spec:
  gatewayClassName: istio
  listeners: [{name: http, port: 80, protocol: HTTP}]
---
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: istio-gw, namespace: edge}
spec:
  selector: {gateway.networking.k8s.io/gateway-name: gw}
  servers: [{port: {number: 81, name: http, protocol: HTTP}, hosts: ["*/*"]}]
`)
	names := func(ns string) []string {
		p := gentest.ProxySpec{ID: "router~10.0.0.1~gw-1." + ns + "~" + ns + ".svc.cluster.local",
			Labels: map[string]string{"gateway.networking.k8s.io/gateway-name": "gw"}}.Proxy(t)
		var out []string
		for _, c := range scope.Gateways(pc, p) {
			out = append(out, c.Name)
		}
		return out
	}
	if got := names("edge"); len(got) != 2 {
		t.Errorf("proxy in edge: %v, want the converted Gateway and istio-gw", got)
	}
	if got := names("other"); len(got) != 1 || got[0] != "istio-gw" {
		t.Errorf("proxy in other: %v, want istio-gw only", got)
	}
}

// TestGatewayAPIConsumerOverride (GAMMA): for a proxy in a namespace
// that holds a consumer route for a service, that route wins over the
// service's producer route, whatever their ages (istiod's "consumer
// override", parity gatewayapi/mesh-consumer); other namespaces see the
// producer route only.
func TestGatewayAPIConsumerOverride(t *testing.T) {
	pc := gentest.MustBuild(t, `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: echo, namespace: apps}
spec:
  hosts: [echo.apps.svc.cluster.local]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.9}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: producer, namespace: apps, creationTimestamp: "2024-01-01T00:00:00Z"}
spec:
  parentRefs: [{group: networking.istio.io, kind: ServiceEntry, name: echo}]
  rules: [{backendRefs: [{name: echo, port: 80}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: consumer, namespace: shop, creationTimestamp: "2025-01-01T00:00:00Z"}
spec:
  parentRefs: [{group: networking.istio.io, kind: ServiceEntry, name: echo, namespace: apps}]
  rules: [{backendRefs: [{name: echo, namespace: apps, port: 80}]}]
`)
	owner := func(ns string) string {
		v := scope.New(pc, gentest.Node(t, "sidecar~10.1.1.1~p."+ns+"~"+ns+".svc.cluster.local", nil))
		c := v.VirtualServiceFor("echo.apps.svc.cluster.local")
		if c == nil {
			return ""
		}
		return c.Namespace
	}
	if got := owner("shop"); got != "shop" {
		t.Errorf("proxy in shop: VirtualService of %q, want the consumer route's (shop)", got)
	}
	for _, ns := range []string{"apps", "other"} {
		if got := owner(ns); got != "apps" {
			t.Errorf("proxy in %s: VirtualService of %q, want the producer route's (apps)", ns, got)
		}
	}
}
