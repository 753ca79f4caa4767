package push_test

import (
	"context"
	"slices"
	"testing"
	"time"

	meshv1alpha1 "istio.io/api/mesh/v1alpha1"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/core/push"
	"github.com/baremesh/baremesh/core/store"
)

// TestNetworkGateways: a snapshot's network gateways are the meshNetworks
// config's (a registryServiceName: its Service's external IPs) and those
// Kubernetes Services make, together; a change of
// either is a global push (reason networks); a Kubernetes update that
// leaves the gateways as they were is not one.
func TestNetworkGateways(t *testing.T) {
	p := push.NewPipeline(store.NewMemory(), model.NewRegistry(model.NewAllocator()), config.DefaultMeshConfig(), push.PipelineOptions{Debounce: time.Millisecond})
	type pushed struct {
		pc *push.PushContext
		r  *push.Request
	}
	got := make(chan pushed, 10)
	p.AddListener(func(pc *push.PushContext, r *push.Request) { got <- pushed{pc, r} })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	synced := make(chan struct{})
	close(synced)
	go p.Run(ctx, synced)
	next := func(what string) pushed {
		t.Helper()
		select {
		case g := <-got:
			return g
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no push within 10s", what)
		}
		return pushed{}
	}
	next("initial")
	p.SetNetworks(&meshv1alpha1.MeshNetworks{Networks: map[string]*meshv1alpha1.Network{
		"net-vm":  {Gateways: []*meshv1alpha1.Network_IstioNetworkGateway{{Gw: &meshv1alpha1.Network_IstioNetworkGateway_Address{Address: "192.0.2.20"}, Port: 15443}}},
		"net-old": {Gateways: []*meshv1alpha1.Network_IstioNetworkGateway{{Gw: &meshv1alpha1.Network_IstioNetworkGateway_RegistryServiceName{RegistryServiceName: "istio-ingressgateway.istio-system.svc.cluster.local"}, Port: 443}}},
	}})
	if g := next("meshNetworks"); !g.r.Reasons.Has(push.ReasonNetworks) || len(g.pc.Networks.For("net-vm")) != 1 {
		t.Fatalf("meshNetworks: %+v, gateways %v", g.r.Reasons, g.pc.Networks.All())
	}
	gwSvc := func(addr string) *model.KubeService {
		return &model.KubeService{Name: "istio-eastwestgateway", Service: &model.Service{Hostname: "istio-eastwestgateway.istio-system.svc.cluster.local", Namespace: "istio-system",
			Ports: []model.Port{{Name: "tls", Number: 15443, Protocol: model.TLS}}}, Gateways: []model.NetworkGateway{{Network: "net-k8s", Addr: addr, Port: 15443}}}
	}
	p.OnKube(model.KubeUpdate{Cluster: "east", Services: []*model.KubeService{gwSvc("192.0.2.30")}})
	g := next("a gateway Service")
	want := []model.NetworkGateway{{Network: "net-k8s", Addr: "192.0.2.30", Port: 15443}, {Network: "net-vm", Addr: "192.0.2.20", Port: 15443}}
	if !g.r.Reasons.Has(push.ReasonNetworks) || !g.r.Full || !slices.Equal(g.pc.Networks.All(), want) {
		t.Fatalf("gateway Service: %+v full %v, gateways %v, want %v", g.r.Reasons, g.r.Full, g.pc.Networks.All(), want)
	}
	// The same gateways again (an unrelated edit of the Service): no
	// networks push.
	same := gwSvc("192.0.2.30")
	same.Service.Labels = map[string]string{"x": "y"}
	p.OnKube(model.KubeUpdate{Cluster: "east", Services: []*model.KubeService{same}})
	if g := next("an edit that keeps the gateways"); g.r.Reasons.Has(push.ReasonNetworks) {
		t.Fatalf("edit keeping the gateways pushed for networks: %+v", g.r.Reasons)
	}
	// A registryServiceName gateway is its Service's external IPs.
	ingress := &model.KubeService{Name: "istio-ingressgateway", Service: &model.Service{Hostname: "istio-ingressgateway.istio-system.svc.cluster.local", Namespace: "istio-system",
		Ports: []model.Port{{Name: "https", Number: 443, Protocol: model.HTTPS}}}, ExternalIPs: []string{"192.0.2.40"}}
	p.OnKube(model.KubeUpdate{Cluster: "east", Services: []*model.KubeService{ingress}})
	if g := next("the registry service's external IP"); !g.r.Reasons.Has(push.ReasonNetworks) ||
		!slices.Equal(g.pc.Networks.For("net-old"), []model.NetworkGateway{{Network: "net-old", Addr: "192.0.2.40", Port: 443}}) {
		t.Fatalf("registryServiceName: %+v, gateways %v", g.r.Reasons, g.pc.Networks.All())
	}
	p.OnKube(model.KubeUpdate{Cluster: "east", DeletedServices: []config.Key{model.KubeServiceKey("east", "istio-system", "istio-eastwestgateway")}})
	if g := next("the gateway Service deleted"); !g.r.Reasons.Has(push.ReasonNetworks) || len(g.pc.Networks.For("net-k8s")) != 0 {
		t.Fatalf("gateway Service deleted: %+v, gateways %v", g.r.Reasons, g.pc.Networks.All())
	}
}
