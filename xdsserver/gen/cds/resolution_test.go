package cds

import (
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"

	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/eds"
	"github.com/baremesh/baremesh/xdsserver/gen/gentest"
)

// TestPassthroughOnGateway: a resolution NONE ServiceEntry is an
// ORIGINAL_DST cluster for a sidecar but an EDS cluster with its
// workloads for a gateway, as istiod's convertResolution (a
// gateway's original destination is its own listener).
func TestPassthroughOnGateway(t *testing.T) {
	pc, err := gentest.Build([]byte(`
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: ext, namespace: default}
spec:
  hosts: [ext.example.com]
  ports: [{number: 7070, name: http, protocol: HTTP}]
  resolution: NONE
  workloadSelector: {labels: {app: ext}}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: ext-1, namespace: default}
spec: {address: 10.0.0.7, labels: {app: ext}}
`))
	if err != nil {
		t.Fatal(err)
	}
	const name = "outbound|7070||ext.example.com"
	for _, tc := range []struct {
		id      string
		want    clusterv3.Cluster_DiscoveryType
		lb      clusterv3.Cluster_LbPolicy
		withEDS bool
	}{
		{"sidecar~10.0.0.1~a.default~default.svc.cluster.local", clusterv3.Cluster_ORIGINAL_DST, clusterv3.Cluster_CLUSTER_PROVIDED, false},
		{"router~10.0.0.2~gw.istio-system~istio-system.svc.cluster.local", clusterv3.Cluster_EDS, clusterv3.Cluster_LEAST_REQUEST, true},
	} {
		p, err := gen.ParseNode(&corev3.Node{Id: tc.id})
		if err != nil {
			t.Fatal(err)
		}
		res, err := Generate(gen.Input{Push: pc, Proxy: p})
		if err != nil {
			t.Fatal(err)
		}
		gentest.Validate(t, res)
		var c *clusterv3.Cluster
		for _, r := range res {
			if r.Name == name {
				c = r.Resource.(*clusterv3.Cluster)
			}
		}
		if c == nil {
			t.Fatalf("%s: no cluster %s", p.Type, name)
		}
		if c.GetType() != tc.want || c.GetLbPolicy() != tc.lb {
			t.Errorf("%s: cluster type %v lb %v, want %v %v", p.Type, c.GetType(), c.GetLbPolicy(), tc.want, tc.lb)
		}
		ep, err := eds.Generate(gen.Input{Push: pc, Proxy: p, Names: []string{name}})
		if err != nil {
			t.Fatal(err)
		}
		if got := len(ep) == 1; got != tc.withEDS {
			t.Fatalf("%s: EDS answered %d assignments, want one: %v", p.Type, len(ep), tc.withEDS)
		}
		if tc.withEDS {
			gentest.Validate(t, ep)
			lbe := ep[0].Resource.(*endpointv3.ClusterLoadAssignment).GetEndpoints()[0].GetLbEndpoints()
			if a := lbe[0].GetEndpoint().GetAddress().GetSocketAddress(); len(lbe) != 1 || a.GetAddress() != "10.0.0.7" || a.GetPortValue() != 7070 {
				t.Errorf("%s: endpoints %v, want 10.0.0.7:7070", p.Type, lbe)
			}
		}
	}
}
