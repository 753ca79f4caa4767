package generation

import (
	"testing"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	meshv1alpha1 "istio.io/api/mesh/v1alpha1"

	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/xdsserver/gen/gentest"
	"github.com/baremesh/baremesh/xdsserver/wire"
	"github.com/baremesh/baremesh/xdsserver/xdstype"
)

// TestNetworkInCacheKeys: with network gateways, two proxies that differ
// only by network get different endpoints (their own network's directly,
// the other's as its gateway), from EDS and from CDS's inline DNS
// endpoints alike; the cache assertion holds.
func TestNetworkInCacheKeys(t *testing.T) {
	var mismatch []string
	b := New(Options{CacheAssert: true, OnCacheMismatch: func(m string) { mismatch = append(mismatch, m) }})
	pc, err := gentest.Build([]byte(`
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: inv, namespace: default}
spec:
  hosts: [inv.fleet.internal]
  ports: [{number: 8080, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.2.0.1, network: b, labels: {security.istio.io/tlsMode: istio}}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: rep, namespace: default}
spec:
  hosts: [rep.fleet.internal]
  ports: [{number: 9090, name: http, protocol: HTTP}]
  resolution: DNS
  endpoints: [{address: rep-1.b.fleet.internal, network: b, labels: {security.istio.io/tlsMode: istio}}]
`))
	if err != nil {
		t.Fatal(err)
	}
	pc.Networks = model.NewNetworkGateways(&meshv1alpha1.MeshNetworks{Networks: map[string]*meshv1alpha1.Network{
		"b": {Gateways: []*meshv1alpha1.Network_IstioNetworkGateway{{Gw: &meshv1alpha1.Network_IstioNetworkGateway_Address{Address: "192.0.2.2"}, Port: 15443}}},
	}}, model.GatewayLookups{})
	first := func(res []*wire.Resource, name string, cla func(*wire.Resource) *endpointv3.ClusterLoadAssignment) string {
		r := wire.Find(res, name)
		if r == nil {
			t.Fatalf("no %s", name)
		}
		return cla(r).GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress().GetAddress()
	}
	edsOf := func(r *wire.Resource) *endpointv3.ClusterLoadAssignment {
		a, err := r.Any()
		if err != nil {
			t.Fatal(err)
		}
		c := &endpointv3.ClusterLoadAssignment{}
		if err := a.UnmarshalTo(c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	for _, c := range []struct{ network, eds, dns string }{{"b", "10.2.0.1", "rep-1.b.fleet.internal"}, {"a", "192.0.2.2", "192.0.2.2"}, {"b", "10.2.0.1", "rep-1.b.fleet.internal"}} {
		p := &model.Proxy{ID: "vm-" + c.network, Type: model.SidecarProxy, Namespace: "default", Network: c.network, IPs: []string{"10.9.0.1"}, Labels: map[string]string{}, Metadata: map[string]string{}}
		res, _, err := b.Build(pc, xdstype.Endpoint, p, []string{"outbound|8080||inv.fleet.internal"}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := first(res, "outbound|8080||inv.fleet.internal", edsOf); got != c.eds {
			t.Errorf("network %s: EDS endpoint %s, want %s", c.network, got, c.eds)
		}
		res, _, err = b.Build(pc, xdstype.Cluster, p, nil, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := first(res, "outbound|9090||rep.fleet.internal", func(r *wire.Resource) *endpointv3.ClusterLoadAssignment {
			return clusterOf(t, res, r.Name).GetLoadAssignment()
		}); got != c.dns {
			t.Errorf("network %s: DNS cluster endpoint %s, want %s", c.network, got, c.dns)
		}
	}
	if len(mismatch) > 0 {
		t.Errorf("cache assertion: %v", mismatch)
	}
}
