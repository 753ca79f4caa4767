package model_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/config/configtest"
	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/core/store"
)

const seSelector = `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: reviews, namespace: ns}
spec:
  hosts: [reviews.ns.mesh]
  ports:
  - {number: 9080, name: http, protocol: HTTP}
  - {number: 9090, name: grpc-api, targetPort: 7070}
  resolution: STATIC
  workloadSelector: {labels: {app: reviews}}
`

func we(name, addr, app string) string {
	return `apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: ` + name + `, namespace: ns}
spec:
  address: ` + addr + `
  labels: {app: ` + app + `, version: v1}
  ports: {http: 8080}
  network: net1
  locality: r1/z1
  weight: 3
  serviceAccount: sa
`
}

type harness struct {
	t   *testing.T
	mem *store.Memory
	reg *model.Registry
	ch  model.Change
}

func newHarness(t *testing.T) *harness {
	h := &harness{t: t, mem: store.NewMemory(), reg: model.NewRegistry(model.NewAllocator())}
	h.mem.Subscribe(func(evs []store.Event) { h.ch = h.reg.Apply(model.Update{Events: evs}) })
	return h
}

func (h *harness) put(manifests ...string) model.Change {
	h.ch = model.Change{}
	var cs []config.Config
	for _, m := range manifests {
		cs = append(cs, configtest.Typed(h.t, m))
	}
	h.mem.Apply(cs, nil)
	return h.ch
}

func (h *harness) del(k config.Key) model.Change {
	h.ch = model.Change{}
	h.mem.Apply(nil, []config.Key{k})
	return h.ch
}

func TestSelectorEndpointsAndIncrementalChanges(t *testing.T) {
	h := newHarness(t)
	ch := h.put(seSelector, we("vm1", "10.0.0.1", "reviews"), we("other", "10.0.0.9", "ratings"))
	svcKey := model.ServiceKey{Hostname: "reviews.ns.mesh", Namespace: "ns"}
	if !ch.Services[svcKey] {
		t.Fatalf("new service not reported: %+v", ch)
	}
	svcs := h.reg.Services()
	if len(svcs) != 1 || !svcs[0].AutoAllocated || len(svcs[0].Addresses) != 1 {
		t.Fatalf("services = %+v", svcs)
	}
	eps := h.reg.Endpoints().Endpoints(svcKey)
	if len(eps) != 2 {
		t.Fatalf("endpoints = %d, want 2 (one per port of the one selected workload)", len(eps))
	}
	byPort := map[string]*model.Endpoint{}
	for _, e := range eps {
		byPort[e.ServicePortName] = e
	}
	// The WorkloadEntry's named port wins; else the targetPort; else the
	// service port.
	if byPort["http"].Port != 8080 || byPort["grpc-api"].Port != 7070 {
		t.Fatalf("ports: http=%d grpc=%d", byPort["http"].Port, byPort["grpc-api"].Port)
	}
	e := byPort["http"]
	if e.Address != "10.0.0.1" || e.Network != "net1" || e.Locality != "r1/z1" || e.Weight != 3 || e.ServiceAccount != "sa" || e.Labels["version"] != "v1" {
		t.Fatalf("endpoint = %+v", e)
	}
	// A ServiceEntry port's name says nothing of its protocol (istiod's
	// convertPort): without one it is sniffed.
	if svcs[0].Ports[1].Protocol != model.Unsupported {
		t.Fatalf("port named grpc-api without a protocol should be sniffed, got %q", svcs[0].Ports[1].Protocol)
	}

	// A new selected workload: endpoints only.
	v := h.reg.Endpoints().Version(svcKey)
	ch = h.put(we("vm2", "10.0.0.2", "reviews"))
	if len(ch.Services) != 0 || !ch.Endpoints[svcKey] {
		t.Fatalf("adding a workload should be endpoint-only: %+v", ch)
	}
	if h.reg.Endpoints().Version(svcKey) == v || len(h.reg.Endpoints().Endpoints(svcKey)) != 4 {
		t.Fatal("endpoint index not updated")
	}
	// A workload nobody selects changes nothing.
	if ch = h.put(we("x", "10.0.0.3", "nobody")); !ch.Empty() {
		t.Fatalf("unselected workload changed something: %+v", ch)
	}
	// Relabelling a workload out of the selector removes its endpoints.
	ch = h.put(we("vm2", "10.0.0.2", "ratings"))
	if !ch.Endpoints[svcKey] || len(h.reg.Endpoints().Endpoints(svcKey)) != 2 {
		t.Fatalf("relabel: %+v, eps=%d", ch, len(h.reg.Endpoints().Endpoints(svcKey)))
	}
	// Deleting the ServiceEntry removes the service and its endpoints.
	ch = h.del(config.Key{Kind: config.ServiceEntry, Namespace: "ns", Name: "reviews"})
	if !ch.Services[svcKey] || len(h.reg.Services()) != 0 || len(h.reg.Endpoints().Endpoints(svcKey)) != 0 {
		t.Fatalf("delete: %+v", ch)
	}
}

const seStatic = `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: ratings, namespace: ns}
spec:
  hosts: [ratings.ns.mesh, ratings-alias.ns.mesh]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.1.0.1}, {address: ADDR}]
`

func TestInlineEndpointEditIsEndpointOnly(t *testing.T) {
	h := newHarness(t)
	h.put(replace(seStatic, "ADDR", "10.1.0.2"))
	before := h.reg.Services()
	ch := h.put(replace(seStatic, "ADDR", "10.1.0.3"))
	if len(ch.Services) != 0 || len(ch.Endpoints) != 2 {
		t.Fatalf("endpoint edit of a 2-host ServiceEntry: %+v", ch)
	}
	after := h.reg.Services()
	for i := range before {
		if before[i].Addresses[0] != after[i].Addresses[0] {
			t.Fatalf("allocated address moved on an endpoint-only change: %v -> %v", before[i].Addresses, after[i].Addresses)
		}
	}
	// A port change is a service change.
	if ch = h.put(replace(replace(seStatic, "ADDR", "10.1.0.3"), "number: 80", "number: 81")); len(ch.Services) != 2 {
		t.Fatalf("port change: %+v", ch)
	}
}

func replace(s, old, nu string) string { return strings.ReplaceAll(s, old, nu) }

func TestAllocationIsDeterministic(t *testing.T) {
	keys := []model.ServiceKey{{Hostname: "a.mesh", Namespace: "x"}, {Hostname: "b.mesh", Namespace: "x"}, {Hostname: "a.mesh", Namespace: "y"}}
	a1, a2 := model.NewAllocator(), model.NewAllocator()
	seen := map[string]bool{}
	for _, k := range keys {
		ip := v4(t, a1, k)
		if seen[ip] {
			t.Fatalf("address %s given twice", ip)
		}
		seen[ip] = true
	}
	// Another process, another order: the same addresses.
	for i := len(keys) - 1; i >= 0; i-- {
		if v4(t, a2, keys[i]) != v4(t, a1, keys[i]) {
			t.Fatalf("%v: allocation depends on order", keys[i])
		}
	}
	// Collisions probe to a free address, and an allocation sticks.
	a := model.NewAllocator()
	got := map[string]model.ServiceKey{}
	for i := 0; i < 5000; i++ {
		k := model.ServiceKey{Hostname: "h" + strconv.Itoa(i) + ".mesh", Namespace: "ns"}
		ip := v4(t, a, k)
		if prev, dup := got[ip]; dup {
			t.Fatalf("%s given to %v and %v", ip, prev, k)
		}
		got[ip] = k
		if v4(t, a, k) != ip {
			t.Fatal("allocation not sticky")
		}
	}
}
