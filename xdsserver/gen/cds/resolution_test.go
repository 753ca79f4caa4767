package cds

import (
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
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
	pc := gentest.MustBuild(t, `
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
`)
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
		p := gentest.Node(t, tc.id, nil)
		c := gentest.ByName[*clusterv3.Cluster](gentest.Run(t, Generate, gen.Input{Push: pc, Proxy: p}))[name]
		if c == nil {
			t.Fatalf("%s: no cluster %s", p.Type, name)
		}
		if c.GetType() != tc.want || c.GetLbPolicy() != tc.lb {
			t.Errorf("%s: cluster type %v lb %v, want %v %v", p.Type, c.GetType(), c.GetLbPolicy(), tc.want, tc.lb)
		}
		ep := gentest.Run(t, eds.Generate, gen.Input{Push: pc, Proxy: p, Names: []string{name}})
		if got := len(ep) == 1; got != tc.withEDS {
			t.Fatalf("%s: EDS answered %d assignments, want one: %v", p.Type, len(ep), tc.withEDS)
		}
		if tc.withEDS {
			lbe := ep[0].Resource.(*endpointv3.ClusterLoadAssignment).GetEndpoints()[0].GetLbEndpoints()
			if a := lbe[0].GetEndpoint().GetAddress().GetSocketAddress(); len(lbe) != 1 || a.GetAddress() != "10.0.0.7" || a.GetPortValue() != 7070 {
				t.Errorf("%s: endpoints %v, want 10.0.0.7:7070", p.Type, lbe)
			}
		}
	}
}
