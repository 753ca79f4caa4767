package model_test

import (
	"slices"
	"testing"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/model"
)

// A view is the index at one generation: later changes do not show in
// it (so a response's cache keys and generators read the same
// endpoints), views of one generation are one, and a new view shows the
// change.
func TestEndpointViewIsPinned(t *testing.T) {
	x := model.NewEndpointIndex()
	svc := model.ServiceKey{Hostname: "a.mesh", Namespace: "ns"}
	shard := config.Key{Kind: config.ServiceEntry, Namespace: "ns", Name: "a"}
	x.SetShard(svc, shard, []*model.Endpoint{{Address: "10.0.0.1", Port: 80}}, nil)
	v1 := x.View()
	if x.View() != v1 {
		t.Fatal("two views of one generation differ")
	}
	// (v1's endpoints are first read after the changes: nothing is
	// memoised yet.)
	x.SetShard(svc, shard, []*model.Endpoint{{Address: "10.0.0.2", Port: 80}}, nil)
	other := config.Key{Kind: config.ServiceEntry, Namespace: "ns", Name: "b"}
	x.SetShard(svc, other, []*model.Endpoint{{Address: "10.0.0.3", Port: 80}}, nil)
	if got := v1.Endpoints(svc); len(got) != 1 || got[0].Address != "10.0.0.1" || !v1.HasAddress("10.0.0.1") || v1.HasAddress("10.0.0.2") {
		t.Fatalf("the pinned view moved with the index: %v", got)
	}
	v2 := x.View()
	if v2 == v1 || v2.Generation() == v1.Generation() || v2.Version(svc) == v1.Version(svc) {
		t.Fatal("a change did not make a new view")
	}
	if got := v2.Endpoints(svc); len(got) != 2 || got[0].Address != "10.0.0.2" || got[1].Address != "10.0.0.3" {
		t.Fatalf("new view endpoints %v", got)
	}
	var none *model.EndpointView
	if none.Endpoints(svc) != nil || none.HasAddress("10.0.0.1") || none.Generation() != 0 {
		t.Fatal("a nil view has endpoints")
	}
}

// At is what is served at an address: each service port once, however
// many shards hold an endpoint there, gone with the last of them; a view
// keeps what was at the address when it was taken.
func TestEndpointsAtAddress(t *testing.T) {
	x := model.NewEndpointIndex()
	a := model.ServiceKey{Hostname: "a.mesh", Namespace: "ns"}
	b := model.ServiceKey{Hostname: "b.mesh", Namespace: "ns"}
	s1 := config.Key{Kind: config.ServiceEntry, Namespace: "ns", Name: "s1"}
	s2 := config.Key{Kind: config.WorkloadEntry, Namespace: "ns", Name: "s2"}
	vm := "10.0.0.1"
	x.SetShard(b, s1, []*model.Endpoint{{Address: vm, Port: 9090, ServicePortName: "grpc"}}, nil)
	x.SetShard(a, s1, []*model.Endpoint{{Address: vm, Port: 8080, ServicePortName: "http"}, {Address: "10.0.0.2", Port: 8080, ServicePortName: "http"}}, nil)
	x.SetShard(a, s2, []*model.Endpoint{{Address: vm, Port: 8080, ServicePortName: "http"}}, nil)
	want := []model.AddrRef{{Service: a, PortName: "http", Port: 8080}, {Service: b, PortName: "grpc", Port: 9090}}
	before := x.View()
	if got := before.At(vm); !slices.Equal(got, want) {
		t.Fatalf("At(%s) = %v, want %v", vm, got, want)
	}
	x.SetShard(a, s1, nil, nil) // one of a's two endpoints at vm goes
	if got := x.View().At(vm); !slices.Equal(got, want) {
		t.Fatalf("after one shard went: %v, want %v", got, want)
	}
	x.SetShard(a, s2, nil, nil)
	x.SetShard(b, s1, []*model.Endpoint{{Address: vm, Port: 9091, ServicePortName: "grpc"}}, nil)
	if got := x.View().At(vm); !slices.Equal(got, []model.AddrRef{{Service: b, PortName: "grpc", Port: 9091}}) {
		t.Fatalf("after both of a's went and b's port moved: %v", got)
	}
	if got := x.View().At("10.0.0.2"); len(got) != 0 {
		t.Fatalf("an address with nothing left: %v", got)
	}
	if got := before.At(vm); !slices.Equal(got, want) {
		t.Fatalf("the earlier view moved: %v", got)
	}
}
