package config

import (
	"errors"
	"strings"
	"testing"
)

// TestParseMeshNetworks: Istio's meshNetworks document parses; an empty
// one is no networks; a bad one is refused naming the file, the line and
// what is wrong.
func TestParseMeshNetworks(t *testing.T) {
	n, err := ParseMeshNetworks([]byte(`
networks:
  net-k8s:
    endpoints: [{fromRegistry: Kubernetes}]
    gateways: [{address: 192.0.2.10, port: 15443}]
  net-vm:
    endpoints: [{fromCidr: 10.10.0.0/16}]
    gateways:
    - {address: 192.0.2.20, port: 15443}
    - {address: 192.0.2.21, port: 15443}
`), "meshnetworks.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := len(n.GetNetworks()["net-vm"].GetGateways()); got != 2 {
		t.Errorf("net-vm: %d gateways, want 2", got)
	}
	if n, err := ParseMeshNetworks([]byte("  \n"), "f"); n != nil || err != nil {
		t.Errorf("empty: %v, %v; want no networks", n, err)
	}
	for _, c := range []struct{ doc, want string }{
		{"networks:\n  a:\n    gateways: [{port: 15443}]\n", "networks.a.gateways[0]: address or registryServiceName is required"},
		{"networks:\n  a:\n    gateways: [{address: 192.0.2.1, port: 70000}]\n", "port 70000"},
		{"networks:\n  a:\n    gatewayz: []\n", "gatewayz"},
		{"networks: [\n", "meshnetworks.yaml"},
	} {
		_, err := ParseMeshNetworks([]byte(c.doc), "meshnetworks.yaml")
		var de *DocError
		if !errors.As(err, &de) || de.File != "meshnetworks.yaml" || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want a DocError naming the file and %q", c.doc, err, c.want)
		}
	}
}
