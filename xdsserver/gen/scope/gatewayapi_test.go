package scope_test

import (
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/gentest"
	"github.com/baremesh/baremesh/xdsserver/gen/scope"
)

// TestGatewayAPIGatewayBindsItsNamespace: a Gateway converted from the
// Gateway API binds a proxy with its gateway-name label in its own
// namespace only; an Istio Gateway's selector binds in any namespace.
func TestGatewayAPIGatewayBindsItsNamespace(t *testing.T) {
	pc, err := gentest.Build([]byte(`apiVersion: gateway.networking.k8s.io/v1
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
`))
	if err != nil {
		t.Fatal(err)
	}
	proxy := func(ns string) *gen.Proxy {
		p, err := gen.ParseNode(&corev3.Node{Id: "router~10.0.0.1~gw-1." + ns + "~" + ns + ".svc.cluster.local",
			Metadata: &structpb.Struct{Fields: map[string]*structpb.Value{"LABELS": structpb.NewStructValue(&structpb.Struct{
				Fields: map[string]*structpb.Value{"gateway.networking.k8s.io/gateway-name": structpb.NewStringValue("gw")}})}}})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	names := func(ns string) []string {
		var out []string
		for _, c := range scope.Gateways(pc, proxy(ns)) {
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
