package eds

import (
	"testing"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	meshv1alpha1 "istio.io/api/mesh/v1alpha1"

	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/gentest"
)

// TestSplitHorizon: with network gateways, a proxy gets the endpoints of
// its own network (and of none) directly, and those of another network
// as that network's gateways, weighted by what they stand for (every
// weight scaled by the lcm of the networks' gateway counts, 2 here, and
// split among a network's gateways); a remote endpoint without Istio
// mTLS is left out; a network without gateways is reached directly. A
// proxy without a network goes through the gateways too; one of IPv4
// only does not get an IPv6 gateway. Without gateways nothing changes.
func TestSplitHorizon(t *testing.T) {
	pc := gentest.MustBuild(t, `
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: inventory, namespace: default}
spec:
  hosts: [inventory.fleet.internal]
  location: MESH_INTERNAL
  ports: [{number: 8080, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints:
  - {address: 10.1.0.1, network: net-vm, labels: {security.istio.io/tlsMode: istio}}
  - {address: 10.2.0.1, network: net-k8s, labels: {security.istio.io/tlsMode: istio}}
  - {address: 10.2.0.2, network: net-k8s, weight: 3, labels: {security.istio.io/tlsMode: istio}}
  - {address: 10.2.0.3, network: net-k8s}
  - {address: 10.3.0.1, network: net-flat}
  - {address: 10.4.0.1, labels: {security.istio.io/tlsMode: istio}}
`)
	gw := func(addr string) *meshv1alpha1.Network_IstioNetworkGateway {
		return &meshv1alpha1.Network_IstioNetworkGateway{Gw: &meshv1alpha1.Network_IstioNetworkGateway_Address{Address: addr}, Port: 15443}
	}
	nets := model.NewNetworkGateways(&meshv1alpha1.MeshNetworks{Networks: map[string]*meshv1alpha1.Network{
		"net-vm":  {Gateways: []*meshv1alpha1.Network_IstioNetworkGateway{gw("192.0.2.20")}},
		"net-k8s": {Gateways: []*meshv1alpha1.Network_IstioNetworkGateway{gw("192.0.2.11"), gw("192.0.2.10"), gw("2001:db8::10")}},
	}}, model.GatewayLookups{})
	const cluster = "outbound|8080||inventory.fleet.internal"
	weights := func(network string, ips ...string) map[string]uint32 {
		p := gentest.Node(t, "sidecar~10.1.0.9~vm.default~default.svc.cluster.local", nil)
		p.Network, p.IPs, p.Families = network, ips, 0
		las := gentest.ByName[*endpointv3.ClusterLoadAssignment](gentest.Run(t, Generate, gen.Input{Push: pc, Proxy: p, Names: []string{cluster}}))
		out := map[string]uint32{}
		for _, l := range las[cluster].GetEndpoints() {
			for _, e := range l.GetLbEndpoints() {
				out[e.GetEndpoint().GetAddress().GetSocketAddress().GetAddress()] = e.GetLoadBalancingWeight().GetValue()
			}
		}
		return out
	}
	same := func(name string, got, want map[string]uint32) {
		t.Helper()
		if len(got) != len(want) {
			t.Errorf("%s: %v, want %v", name, got, want)
			return
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s: %v, want %v", name, got, want)
				return
			}
		}
	}
	same("no gateways", weights("net-vm", "10.1.0.9"), map[string]uint32{"10.1.0.1": 1, "10.2.0.1": 1, "10.2.0.2": 3, "10.2.0.3": 1, "10.3.0.1": 1, "10.4.0.1": 1})

	pc.Networks = nets // a test's own snapshot
	// Scale lcm(1, 3) = 3; net-k8s's mTLS endpoints weigh 3 + 9 = 12, 4 per gateway.
	same("VM network, dual stack", weights("net-vm", "10.1.0.9", "2001:db8::9"), map[string]uint32{
		"10.1.0.1": 3, "192.0.2.10": 4, "192.0.2.11": 4, "2001:db8::10": 4, "10.3.0.1": 3, "10.4.0.1": 3})
	// Two reachable gateways: 3/2 + 9/2 = 1 + 4 each (integer shares, as istiod).
	same("VM network, IPv4 only", weights("net-vm", "10.1.0.9"), map[string]uint32{
		"10.1.0.1": 3, "192.0.2.10": 5, "192.0.2.11": 5, "10.3.0.1": 3, "10.4.0.1": 3})
	same("no network of its own", weights("", "10.1.0.9"), map[string]uint32{
		"192.0.2.20": 3, "192.0.2.10": 5, "192.0.2.11": 5, "10.3.0.1": 3, "10.4.0.1": 3})
}
