package cds

import (
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"

	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/eds"
	"github.com/baremesh/baremesh/xdsserver/gen/gentest"
)

// TestSNIClusters: a router with an AUTO_PASSTHROUGH server gets an
// "outbound_.PORT_.SUBSET_.HOST" cluster per service port and subset of
// the mesh (mesh-external ones left out), without TLS of its own (the
// client's mTLS passes through), and their endpoints are only those that
// take Istio mTLS (istiod's SniDnatClusterMode and
// EndpointsWithMTLSFilter). A router without such a server gets none.
func TestSNIClusters(t *testing.T) {
	pc := gentest.MustBuild(t, gentest.EastWestConfig)
	ew := gentest.ProxySpec{ID: "router~10.0.0.3~eastwest-1.istio-system~istio-system.svc.cluster.local", Labels: map[string]string{"istio": "eastwestgateway"}}.Proxy(t)
	cs := gentest.ByName[*clusterv3.Cluster](gentest.Run(t, Generate, gen.Input{Push: pc, Proxy: ew}))
	for _, name := range []string{"outbound_.5432_._.inventory.fleet.internal", "outbound_.5432_.v1_.inventory.fleet.internal"} {
		c := cs[name]
		if c == nil {
			t.Fatalf("no cluster %s", name)
		}
		if c.GetTransportSocket() != nil || len(c.GetTransportSocketMatches()) > 0 {
			t.Errorf("%s has TLS of its own; it passes the client's through", name)
		}
		if c.GetEdsClusterConfig().GetServiceName() != name {
			t.Errorf("%s: EDS service name %q", name, c.GetEdsClusterConfig().GetServiceName())
		}
	}
	if cs["outbound_.443_._.saas.fleet.internal"] != nil {
		t.Error("a mesh-external service is exposed through the east-west gateway")
	}
	if cs["outbound|5432||inventory.fleet.internal"].GetTransportSocketMatches() == nil {
		t.Error("the ordinary cluster lost its auto mTLS")
	}
	las := gentest.ByName[*endpointv3.ClusterLoadAssignment](gentest.Run(t, eds.Generate, gen.Input{Push: pc, Proxy: ew,
		Names: []string{"outbound_.5432_.v1_.inventory.fleet.internal", "outbound|5432|v1|inventory.fleet.internal"}}))
	count := func(name string) int {
		n := 0
		for _, l := range las[name].GetEndpoints() {
			n += len(l.GetLbEndpoints())
		}
		return n
	}
	if n := count("outbound_.5432_.v1_.inventory.fleet.internal"); n != 1 {
		t.Errorf("SNI cluster: %d endpoints, want only the one taking Istio mTLS", n)
	}
	if n := count("outbound|5432|v1|inventory.fleet.internal"); n != 2 {
		t.Errorf("ordinary cluster: %d endpoints, want both", n)
	}

	gw := gentest.ProxySpec{ID: "router~10.0.0.4~ingress-1.istio-system~istio-system.svc.cluster.local", Labels: map[string]string{"istio": "ingressgateway"}}.Proxy(t)
	for name := range gentest.ByName[*clusterv3.Cluster](gentest.Run(t, Generate, gen.Input{Push: pc, Proxy: gw})) {
		if gen.IsSNIClusterName(name) {
			t.Errorf("a router without AUTO_PASSTHROUGH got %s", name)
		}
	}
}
