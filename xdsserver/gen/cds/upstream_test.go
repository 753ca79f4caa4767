package cds

import (
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"

	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/gentest"
)

// TestRetryBudgetAndProxyProtocol: a DestinationRule's retryBudget and
// proxyProtocol reach its clusters (istiod's defaults: 20%, 3 retries)
// and leave the shared parts others use as they were: the default
// circuit breakers and the auto-mTLS socket matches of a service
// without the rule. (The parity scenario misc/upstream-policy compares
// the output with istiod's.)
func TestRetryBudgetAndProxyProtocol(t *testing.T) {
	pc := gentest.MustBuild(t, `
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: a, namespace: default}
spec:
  hosts: [a.mesh]
  location: MESH_INTERNAL
  ports: [{number: 8080, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.1}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: b, namespace: default}
spec:
  hosts: [b.mesh]
  location: MESH_INTERNAL
  ports: [{number: 8080, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.2}]
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: a, namespace: default}
spec:
  host: a.mesh
  trafficPolicy: {retryBudget: {}, proxyProtocol: {version: V2}}
`)
	p := gentest.Node(t, "sidecar~10.0.0.9~c.default~default.svc.cluster.local", nil)
	clusters := gentest.ByName[*clusterv3.Cluster](gentest.Run(t, Generate, gen.Input{Push: pc, Proxy: p}))
	a, b := clusters["outbound|8080||a.mesh"], clusters["outbound|8080||b.mesh"]
	rb := a.GetCircuitBreakers().GetThresholds()[0].GetRetryBudget()
	if rb.GetBudgetPercent().GetValue() != 20 || rb.GetMinRetryConcurrency().GetValue() != 3 {
		t.Errorf("a: retry budget %v, want 20%% and 3", rb)
	}
	for _, m := range a.GetTransportSocketMatches() {
		if m.GetTransportSocket().GetName() != "envoy.transport_sockets.upstream_proxy_protocol" {
			t.Errorf("a: match %s socket %s, want the PROXY protocol wrapper", m.GetName(), m.GetTransportSocket().GetName())
		}
	}
	if len(a.GetTransportSocketMatches()) == 0 {
		t.Fatal("a: no auto-mTLS matches")
	}
	if defaultCircuitBreakers.GetThresholds()[0].GetRetryBudget() != nil || b.GetCircuitBreakers().GetThresholds()[0].GetRetryBudget() != nil {
		t.Error("the shared default circuit breakers took a's retry budget")
	}
	for _, m := range b.GetTransportSocketMatches() {
		if m.GetTransportSocket().GetName() == "envoy.transport_sockets.upstream_proxy_protocol" {
			t.Errorf("b: match %s wrapped in a's PROXY protocol (a shared match was altered)", m.GetName())
		}
	}
}
