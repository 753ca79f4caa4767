package model

import (
	"fmt"
	"slices"
	"testing"

	meshv1alpha1 "istio.io/api/mesh/v1alpha1"
)

// TestNetworkGateways: gateways by network, sorted by address and port,
// duplicates once; the weight scale is the lcm of the networks' gateway
// counts; names, and a registry service that resolves to nothing, are
// left out and said why; one that resolves is its IPs' gateways; with no
// resolver, registry services are not read.
func TestNetworkGateways(t *testing.T) {
	gw := func(addr string, port uint32) *meshv1alpha1.Network_IstioNetworkGateway {
		return &meshv1alpha1.Network_IstioNetworkGateway{Gw: &meshv1alpha1.Network_IstioNetworkGateway_Address{Address: addr}, Port: port}
	}
	registry := func(host string) *meshv1alpha1.Network_IstioNetworkGateway {
		return &meshv1alpha1.Network_IstioNetworkGateway{Gw: &meshv1alpha1.Network_IstioNetworkGateway_RegistryServiceName{RegistryServiceName: host}, Port: 15443}
	}
	nets := &meshv1alpha1.MeshNetworks{Networks: map[string]*meshv1alpha1.Network{
		"a": {Gateways: []*meshv1alpha1.Network_IstioNetworkGateway{gw("192.0.2.2", 15443), gw("192.0.2.1", 15443), gw("192.0.2.1", 15443)}},
		"b": {Gateways: []*meshv1alpha1.Network_IstioNetworkGateway{gw("192.0.2.3", 15443), gw("192.0.2.4", 15443), gw("192.0.2.5", 15443), gw("gw.example.com", 15443)}},
		"c": {Gateways: []*meshv1alpha1.Network_IstioNetworkGateway{registry("missing.istio-system.svc.cluster.local")}},
		"d": {Gateways: []*meshv1alpha1.Network_IstioNetworkGateway{registry("istio-eastwestgateway.istio-system.svc.cluster.local")}},
	}}
	resolve := func(host string) []string {
		if host == "istio-eastwestgateway.istio-system.svc.cluster.local" {
			return []string{"192.0.2.9"}
		}
		return nil
	}
	g := NewNetworkGateways(nets, GatewayLookups{Registry: resolve})
	if !g.Enabled() {
		t.Fatal("not enabled")
	}
	if got := g.For("a"); !slices.Equal(got, []NetworkGateway{{"a", "192.0.2.1", 15443}, {"a", "192.0.2.2", 15443}}) {
		t.Errorf("a: %v", got)
	}
	if g.For("c") != nil || len(g.Skipped) != 2 {
		t.Errorf("c: %v; skipped %v, want the name and the registry service", g.For("c"), g.Skipped)
	}
	if got := g.For("d"); !slices.Equal(got, []NetworkGateway{{"d", "192.0.2.9", 15443}}) {
		t.Errorf("d: %v, want the registry service's IP", got)
	}
	if n := NewNetworkGateways(nets, GatewayLookups{}); n.For("d") != nil || len(n.Skipped) != 1 {
		t.Errorf("no resolver: d %v, skipped %v; want registry services not read", n.For("d"), n.Skipped)
	}
	if s := g.ScaleFactor(); s != 6 {
		t.Errorf("scale %d, want lcm(2, 3) = 6", s)
	}
	var none *NetworkGateways
	if none.Enabled() || none.ScaleFactor() != 1 || NewNetworkGateways(nil, GatewayLookups{}).Enabled() {
		t.Error("no meshNetworks: enabled")
	}
}

// TestNetworkGatewaysScaleBounded: gateway counts whose lcm is past the
// uint32 range (2, 3, 5, ..., 29: 6,469,693,230) give a bounded scale,
// not a wrapped one (a scale of 0 would make every weight 0, which
// Envoy refuses).
func TestNetworkGatewaysScaleBounded(t *testing.T) {
	nets := &meshv1alpha1.MeshNetworks{Networks: map[string]*meshv1alpha1.Network{}}
	addr := 0
	for _, n := range []int{2, 3, 5, 7, 11, 13, 17, 19, 23, 29} {
		nw := &meshv1alpha1.Network{}
		for range n {
			addr++
			nw.Gateways = append(nw.Gateways, &meshv1alpha1.Network_IstioNetworkGateway{
				Gw: &meshv1alpha1.Network_IstioNetworkGateway_Address{Address: fmt.Sprintf("10.9.%d.%d", addr/250, addr%250+1)}, Port: 15443})
		}
		nets.Networks[fmt.Sprintf("net-%d", n)] = nw
	}
	if s := NewNetworkGateways(nets, GatewayLookups{}).ScaleFactor(); s == 0 || s > 1<<16 {
		t.Errorf("scale %d, want 1..65536", s)
	}
	small := NewNetworkGateways(&meshv1alpha1.MeshNetworks{Networks: map[string]*meshv1alpha1.Network{"a": nets.Networks["net-2"], "b": nets.Networks["net-3"]}}, GatewayLookups{})
	if s := small.ScaleFactor(); s != 6 {
		t.Errorf("scale %d, want lcm(2, 3) = 6 where it fits", s)
	}
}

// TestNetworkGatewayNames: a gateway given by hostname (in meshNetworks
// or a Kubernetes load balancer's) is listed in Names for a resolver, and
// is the IPs Names gives it; until it resolves it is in Skipped.
func TestNetworkGatewayNames(t *testing.T) {
	nets := &meshv1alpha1.MeshNetworks{Networks: map[string]*meshv1alpha1.Network{"a": {Gateways: []*meshv1alpha1.Network_IstioNetworkGateway{
		{Gw: &meshv1alpha1.Network_IstioNetworkGateway_Address{Address: "gw-a.example.com"}, Port: 15443}}}}}
	lb := NetworkGateway{Network: "b", Addr: "elb-b.example.com", Port: 15443}
	g := NewNetworkGateways(nets, GatewayLookups{}, lb)
	if !slices.Equal(g.Names, []string{"elb-b.example.com", "gw-a.example.com"}) || len(g.Skipped) != 2 || g.Enabled() {
		t.Errorf("unresolved: names %v, skipped %v, enabled %v", g.Names, g.Skipped, g.Enabled())
	}
	resolved := map[string][]string{"gw-a.example.com": {"192.0.2.1", "192.0.2.2"}, "elb-b.example.com": {"192.0.2.9"}}
	g = NewNetworkGateways(nets, GatewayLookups{Names: func(h string) []string { return resolved[h] }}, lb)
	if got := g.For("a"); !slices.Equal(got, []NetworkGateway{{"a", "192.0.2.1", 15443}, {"a", "192.0.2.2", 15443}}) {
		t.Errorf("a: %v", got)
	}
	if got := g.For("b"); !slices.Equal(got, []NetworkGateway{{"b", "192.0.2.9", 15443}}) || len(g.Skipped) != 0 {
		t.Errorf("b: %v, skipped %v", got, g.Skipped)
	}
}
