package push_test

import (
	"context"
	"testing"
	"time"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/config/configtest"
	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/core/push"
	"github.com/baremesh/baremesh/core/store"
)

// TestEndpointOnlyChangeIndexedByNextFullPush: an endpoint-only edit keeps
// the snapshot (and its ServiceEntry index); the next full push, of any
// kind, re-indexes the ServiceEntries, so Configs(ServiceEntry) — what the
// Istio config types serve over MCP — is not stale for good.
func TestEndpointOnlyChangeIndexedByNextFullPush(t *testing.T) {
	mem := store.NewMemory()
	p := push.NewPipeline(mem, model.NewRegistry(model.NewAllocator()), config.DefaultMeshConfig(), push.PipelineOptions{Debounce: 5 * time.Millisecond, EndpointsBypassDebounce: true})
	mem.Subscribe(p.OnEvents)
	type pushed struct {
		pc  *push.PushContext
		req *push.Request
	}
	got := make(chan pushed, 10)
	p.AddListener(func(pc *push.PushContext, r *push.Request) { got <- pushed{pc, r} })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	synced := make(chan struct{})
	close(synced)
	go p.Run(ctx, synced)
	next := func() pushed {
		t.Helper()
		select {
		case x := <-got:
			return x
		case <-time.After(10 * time.Second):
			t.Fatal("no push within 10s")
		}
		return pushed{}
	}
	addr := func(pc *push.PushContext) string {
		cs := pc.Configs(config.ServiceEntry)
		if len(cs) != 1 {
			return ""
		}
		return cs[0].Spec.(*networking.ServiceEntry).GetEndpoints()[0].GetAddress()
	}
	next() // initial
	mem.Apply([]config.Config{configtest.Typed(t, replace(seA, "ADDR", "10.0.0.1"))}, nil)
	next()
	mem.Apply([]config.Config{configtest.Typed(t, replace(seA, "ADDR", "10.0.0.2"))}, nil)
	if x := next(); x.req.Full {
		t.Fatalf("endpoint edit gave a full push: %+v", x.req)
	}
	mem.Apply([]config.Config{configtest.Typed(t, replace(vsGateway, "GW", "gw1"))}, nil)
	x := next()
	if !x.req.Full {
		t.Fatalf("VirtualService push not full: %+v", x.req)
	}
	if a := addr(x.pc); a != "10.0.0.2" {
		t.Fatalf("after the next full push Configs(ServiceEntry) holds address %q, want 10.0.0.2", a)
	}
}
