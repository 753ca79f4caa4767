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
	mem, _, next := runPipeline(t)
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

// TestEndpointOnlyChangeIndexedAtOnce (issue #25): a WorkloadEntry's
// address change is endpoint-only, yet its snapshot already serves the
// new WorkloadEntry (MCP subscribers read Configs), at the same version
// (caches keyed by it stay warm) and with its key in the request (the
// Istio config type of the kind is pushed); a WorkloadEntry nobody here
// selects still gives a request naming it. Before, the address reached
// Configs only with the next full push, and the unselected entry gave
// no push at all.
func TestEndpointOnlyChangeIndexedAtOnce(t *testing.T) {
	mem, p, next := runPipeline(t)
	const se = `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: vm, namespace: ns}
spec:
  hosts: [vm.ns.mesh]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: STATIC
  workloadSelector: {labels: {app: vm}}
`
	const we = `apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: NAME, namespace: ns}
spec: {address: ADDR, labels: {app: APP}}
`
	entry := func(name, addr, app string) config.Config {
		return configtest.Typed(t, replace(replace(replace(we, "NAME", name), "ADDR", addr), "APP", app))
	}
	addrOf := func(pc *push.PushContext, name string) string {
		for _, c := range pc.Configs(config.WorkloadEntry) {
			if c.Name == name {
				return c.Spec.(*networking.WorkloadEntry).GetAddress()
			}
		}
		return ""
	}
	next() // initial
	mem.Apply([]config.Config{configtest.Typed(t, se), entry("vm1", "10.0.0.1", "vm")}, nil)
	first := next()
	mem.Apply([]config.Config{entry("vm1", "10.0.0.2", "vm")}, nil)
	x := next()
	key := config.Key{Kind: config.WorkloadEntry, Namespace: "ns", Name: "vm1"}
	if x.req.Full || !x.req.Configs[key] {
		t.Fatalf("address change: push %+v, want an endpoint push naming %s", x.req, key)
	}
	if a := addrOf(x.pc, "vm1"); a != "10.0.0.2" {
		t.Fatalf("endpoint push's snapshot serves address %q, want 10.0.0.2", a)
	}
	if x.pc.Version != first.pc.Version {
		t.Fatalf("endpoint push moved the version %d -> %d", first.pc.Version, x.pc.Version)
	}
	if a := addrOf(p.Current(), "vm1"); a != "10.0.0.2" {
		t.Fatalf("Current serves address %q, want 10.0.0.2", a)
	}
	mem.Apply([]config.Config{entry("lone", "10.0.0.9", "nobody")}, nil)
	x = next()
	if lone := (config.Key{Kind: config.WorkloadEntry, Namespace: "ns", Name: "lone"}); x.req.Full || !x.req.Configs[lone] || addrOf(x.pc, "lone") != "10.0.0.9" {
		t.Fatalf("unselected WorkloadEntry: push %+v, address %q", x.req, addrOf(x.pc, "lone"))
	}
}

// pushed is one push a pipeline listener saw.
type pushed struct {
	pc  *push.PushContext
	req *push.Request
}

// runPipeline runs a pipeline over a memory store (5 ms debounce,
// endpoint pushes undebounced) until the test ends; the returned func
// waits for its next push.
func runPipeline(t *testing.T) (*store.Memory, *push.Pipeline, func() pushed) {
	mem := store.NewMemory()
	p := push.NewPipeline(mem, model.NewRegistry(model.NewAllocator()), config.DefaultMeshConfig(), push.PipelineOptions{Debounce: 5 * time.Millisecond, EndpointsBypassDebounce: true})
	mem.Subscribe(p.OnEvents)
	got := make(chan pushed, 10)
	p.AddListener(func(pc *push.PushContext, r *push.Request) { got <- pushed{pc, r} })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	synced := make(chan struct{})
	close(synced)
	go p.Run(ctx, synced)
	return mem, p, func() pushed {
		t.Helper()
		select {
		case x := <-got:
			return x
		case <-time.After(10 * time.Second):
			t.Fatal("no push within 10s")
		}
		return pushed{}
	}
}
