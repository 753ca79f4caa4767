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

// TestTrafficDistributionDNS: a ServiceEntry's PreferClose is locality
// failover without outlier detection, as istiod's: an EDS cluster's
// other region drops to a lower priority and the cluster weighs
// localities. A DNS cluster with the annotation and endpoints in two
// localities is built and valid, with no failover priorities (istiod's
// CDS applies none to DNS clusters; this Istio build panics on this
// config instead, so the parity scenario cannot hold it).
func TestTrafficDistributionDNS(t *testing.T) {
	pc := gentest.MustBuild(t, `
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: near, namespace: default, annotations: {networking.istio.io/traffic-distribution: PreferClose}}
spec:
  hosts: [near.td.mesh]
  location: MESH_INTERNAL
  ports: [{number: 8080, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.20.0.1, locality: r1/z1}, {address: 10.20.0.3, locality: r2/z1}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: dns, namespace: default, annotations: {networking.istio.io/traffic-distribution: PreferClose}}
spec:
  hosts: [dns.td.mesh]
  location: MESH_EXTERNAL
  ports: [{number: 443, name: tls, protocol: TLS}]
  resolution: DNS
  endpoints: [{address: a.dns.example.com, locality: r1/z1}, {address: b.dns.example.com, locality: r2/z1}]
`)
	p := gentest.Node(t, "sidecar~10.0.0.1~a.default~default.svc.cluster.local", nil)
	p.Locality = &corev3.Locality{Region: "r1", Zone: "z1"}
	clusters := gentest.ByName[*clusterv3.Cluster](gentest.Run(t, Generate, gen.Input{Push: pc, Proxy: p}))

	near := clusters["outbound|8080||near.td.mesh"]
	if near.GetCommonLbConfig().GetLocalityWeightedLbConfig() == nil {
		t.Errorf("near: no locality weighted config (failover forced by the traffic distribution)")
	}
	cla := gentest.Run(t, eds.Generate, gen.Input{Push: pc, Proxy: p, Names: []string{"outbound|8080||near.td.mesh"}})[0].Resource.(*endpointv3.ClusterLoadAssignment)
	prio := map[string]uint32{}
	for _, l := range cla.GetEndpoints() {
		prio[l.GetLocality().GetRegion()] = l.GetPriority()
	}
	if prio["r1"] != 0 || prio["r2"] != 1 {
		t.Errorf("near: priorities by region %v, want r1 0 and r2 1", prio)
	}

	dns := clusters["outbound|443||dns.td.mesh"]
	if dns.GetType() != clusterv3.Cluster_STRICT_DNS || len(dns.GetLoadAssignment().GetEndpoints()) != 2 {
		t.Fatalf("dns: type %v with %d localities, want STRICT_DNS with 2", dns.GetType(), len(dns.GetLoadAssignment().GetEndpoints()))
	}
	for _, l := range dns.GetLoadAssignment().GetEndpoints() {
		if l.GetPriority() != 0 {
			t.Errorf("dns: locality %v at priority %d, want 0", l.GetLocality(), l.GetPriority())
		}
	}
}
