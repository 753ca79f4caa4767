package eds_test

import (
	"testing"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"

	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/eds"
	"github.com/baremesh/baremesh/xdsserver/gen/gentest"
)

// TestTLSModeFollowsPeerAuthentication follows istiod's EDS mtlsChecker
// (issue #25 eds-endpoint-tlsmode): an endpoint labelled tlsMode=istio
// gets the transport socket match metadata (and so auto mTLS) only where
// its workload's PeerAuthentication for the endpoint's port is not
// DISABLE; a DestinationRule tls mode decides alone where it is set.
func TestTLSModeFollowsPeerAuthentication(t *testing.T) {
	pc := gentest.MustBuild(t, `
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: web, namespace: default}
spec:
  selector: {matchLabels: {app: web}}
  portLevelMtls:
    8080: {mode: DISABLE}
    9000: {mode: PERMISSIVE}
---
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: plain, namespace: plain}
spec:
  mtls: {mode: DISABLE}
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: web, namespace: default}
spec:
  hosts: [web.default.svc.cluster.local]
  location: MESH_INTERNAL
  ports: [{number: 8080, name: http, protocol: HTTP}, {number: 9000, name: tcp, protocol: TCP}, {number: 9443, name: tls, protocol: TCP}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.1, labels: {app: web, security.istio.io/tlsMode: istio}}]
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: web, namespace: default}
spec:
  host: web.default.svc.cluster.local
  trafficPolicy:
    portLevelSettings:
    - port: {number: 9443}
      tls: {mode: ISTIO_MUTUAL}
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: plain, namespace: plain}
spec:
  hosts: [plain.plain.svc.cluster.local]
  location: MESH_INTERNAL
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.2, labels: {security.istio.io/tlsMode: istio}}, {address: 10.0.0.3, labels: {security.istio.io/tlsMode: disabled}}]
`)
	p := gentest.Node(t, "sidecar~10.0.0.9~client.default~default.svc.cluster.local", nil)
	want := map[string]map[string]string{ // cluster -> address -> tlsMode
		"outbound|8080||web.default.svc.cluster.local": {"10.0.0.1": ""},      // workload port DISABLE
		"outbound|9000||web.default.svc.cluster.local": {"10.0.0.1": "istio"}, // workload port PERMISSIVE
		"outbound|9443||web.default.svc.cluster.local": {"10.0.0.1": "istio"}, // DestinationRule ISTIO_MUTUAL
		"outbound|80||plain.plain.svc.cluster.local":   {"10.0.0.2": "", "10.0.0.3": ""},
	}
	var names []string
	for n := range want {
		names = append(names, n)
	}
	res := gentest.Run(t, eds.Generate, gen.Input{Push: pc, Proxy: p, Names: names})
	if len(res) != len(want) {
		t.Fatalf("%d assignments, want %d", len(res), len(want))
	}
	for _, r := range res {
		for _, loc := range r.Resource.(*endpointv3.ClusterLoadAssignment).GetEndpoints() {
			for _, lb := range loc.GetLbEndpoints() {
				addr := lb.GetEndpoint().GetAddress().GetSocketAddress().GetAddress()
				got := lb.GetMetadata().GetFilterMetadata()["envoy.transport_socket_match"].GetFields()["tlsMode"].GetStringValue()
				if w, ok := want[r.Name][addr]; !ok || got != w {
					t.Errorf("%s %s: tlsMode %q, want %q", r.Name, addr, got, w)
				}
			}
		}
	}
}
