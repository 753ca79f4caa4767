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
