package push_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/config/configtest"
	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/core/push"
	"github.com/baremesh/baremesh/core/store"
)

const vsGateway = `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: vs, namespace: ns}
spec:
  hosts: [a.mesh]
  gateways: [GW]
  http: [{route: [{destination: {host: a.mesh}}]}]
`

const seA = `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: a, namespace: ns}
spec:
  hosts: [a.mesh]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: ADDR}]
`

// TestPipeline: requests say what changed; endpoint-only changes reuse the
// snapshot; gateway-only VirtualServices are marked; debouncing merges.
func TestPipeline(t *testing.T) {
	mem := store.NewMemory()
	p := push.NewPipeline(mem, model.NewRegistry(model.NewAllocator()), config.DefaultMeshConfig(), push.PipelineOptions{Debounce: 20 * time.Millisecond, EndpointsBypassDebounce: true})
	mem.Subscribe(p.OnEvents)
	got := make(chan *push.Request, 10)
	versions := make(chan uint64, 10)
	p.AddListener(func(pc *push.PushContext, r *push.Request) { got <- r; versions <- pc.Version })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	synced := make(chan struct{})
	close(synced)
	go p.Run(ctx, synced)
	next := func() (*push.Request, uint64) {
		t.Helper()
		select {
		case r := <-got:
			return r, <-versions
		case <-time.After(10 * time.Second):
			t.Fatal("no push within 10s")
		}
		return nil, 0
	}
	if r, _ := next(); r.Reasons[push.ReasonInitial] != 1 {
		t.Fatalf("first push: %+v", r)
	}
	mem.Apply([]config.Config{configtest.Typed(t, replace(seA, "ADDR", "10.0.0.1"))}, nil)
	r, v1 := next()
	if !r.Full || len(r.Services) != 1 {
		t.Fatalf("new service: %+v", r)
	}
	// An endpoint edit: not full, the same snapshot, the address touched.
	mem.Apply([]config.Config{configtest.Typed(t, replace(seA, "ADDR", "10.0.0.2"))}, nil)
	r, v2 := next()
	if r.Full || len(r.Endpoints) != 1 || !r.Addresses["10.0.0.1"] || !r.Addresses["10.0.0.2"] || v2 != v1 {
		t.Fatalf("endpoint edit: %+v (snapshot %d -> %d)", r, v1, v2)
	}
	// Two gateway-only VirtualService writes merge into one gateway-only
	// request; a mesh-bound version is not gateway-only.
	mem.Apply([]config.Config{configtest.Typed(t, replace(vsGateway, "GW", "gw1"))}, nil)
	mem.Apply([]config.Config{configtest.Typed(t, replace(vsGateway, "GW", "gw2"))}, nil)
	r, v3 := next()
	k := config.Key{Kind: config.VirtualService, Namespace: "ns", Name: "vs"}
	if !r.Full || !r.GatewayOnly[k] || v3 == v2 {
		t.Fatalf("gateway-only VS: %+v", r)
	}
	mem.Apply([]config.Config{configtest.Typed(t, replace(vsGateway, "GW", "mesh"))}, nil)
	if r, _ := next(); r.GatewayOnly[k] {
		t.Fatalf("VS moved to mesh is not gateway-only: %+v", r)
	}
}

func replace(s, old, nu string) string { return strings.Replace(s, old, nu, 1) }
