package push_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/config/configtest"
	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/core/push"
	"github.com/baremesh/baremesh/core/store"
)

// BenchmarkReindexWorkloadEntries is what an endpoint push that names
// WorkloadEntries adds (PushContext.Reindex) with 4,000 of them.
func BenchmarkReindexWorkloadEntries(b *testing.B) {
	mem := store.NewMemory()
	var cs []config.Config
	for i := range 4000 {
		cs = append(cs, configtest.Typed(b, fmt.Sprintf("apiVersion: networking.istio.io/v1\nkind: WorkloadEntry\nmetadata: {name: vm-%d, namespace: ns%d}\nspec: {address: 10.%d.%d.%d, labels: {app: a%d}}\n", i, i%20, i/65536%256, i/256%256, i%256, i%100)))
	}
	mem.Apply(cs, nil)
	pc := push.Build(nil, push.Inputs{Store: mem, Registry: model.NewRegistry(model.NewAllocator()), Mesh: config.DefaultMeshConfig()}, nil, time.Now())
	// One WorkloadEntry moved, as an endpoint push carries it.
	moved := cs[1234].DeepCopy()
	mem.Apply([]config.Config{moved}, nil)
	keys := map[config.Key]bool{moved.Key(): true}
	b.ReportAllocs()
	for b.Loop() {
		pc.Reindex(mem, keys, time.Now())
	}
}

// TestReindexPatchesAsAFullList: Reindex's patched index (updates,
// additions, removals, a namespace emptied and one new) equals a full
// re-list.
func TestReindexPatchesAsAFullList(t *testing.T) {
	we := func(ns, name, addr string) config.Config {
		return configtest.Typed(t, fmt.Sprintf("apiVersion: networking.istio.io/v1\nkind: WorkloadEntry\nmetadata: {name: %s, namespace: %s}\nspec: {address: %s}\n", name, ns, addr))
	}
	mem := store.NewMemory()
	mem.Apply([]config.Config{we("a", "x", "10.0.0.1"), we("b", "x", "10.0.0.2"), we("b", "yy", "10.0.0.3"), we("c", "z", "10.0.0.4")}, nil)
	pc := push.Build(nil, push.Inputs{Store: mem, Registry: model.NewRegistry(model.NewAllocator()), Mesh: config.DefaultMeshConfig()}, nil, time.Now())
	key := func(ns, name string) config.Key {
		return config.Key{Kind: config.WorkloadEntry, Namespace: ns, Name: name}
	}
	mem.Apply([]config.Config{we("b", "yy", "10.9.9.9"), we("b", "w", "10.0.0.5"), we("d", "nn", "10.0.0.6")}, []config.Key{key("a", "x"), key("b", "x")})
	got := pc.Reindex(mem, map[config.Key]bool{key("b", "yy"): true, key("b", "w"): true, key("d", "nn"): true, key("a", "x"): true, key("b", "x"): true, key("q", "never"): true}, time.Now())
	want := push.Build(nil, push.Inputs{Store: mem, Registry: model.NewRegistry(model.NewAllocator()), Mesh: config.DefaultMeshConfig()}, nil, time.Now())
	str := func(cs []config.Config) string {
		s := ""
		for _, c := range cs {
			s += c.Namespace + "/" + c.Name + "=" + c.Spec.(interface{ GetAddress() string }).GetAddress() + " "
		}
		return s
	}
	if g, w := str(got.Configs(config.WorkloadEntry)), str(want.Configs(config.WorkloadEntry)); g != w {
		t.Fatalf("patched %s\nre-listed %s", g, w)
	}
	for _, ns := range []string{"a", "b", "c", "d", "q"} {
		if g, w := str(got.ConfigsIn(config.WorkloadEntry, ns)), str(want.ConfigsIn(config.WorkloadEntry, ns)); g != w {
			t.Fatalf("namespace %s: patched %s, re-listed %s", ns, g, w)
		}
	}
	if str(pc.Configs(config.WorkloadEntry)) != "a/x=10.0.0.1 b/x=10.0.0.2 b/yy=10.0.0.3 c/z=10.0.0.4 " {
		t.Fatalf("the old snapshot was altered: %s", str(pc.Configs(config.WorkloadEntry)))
	}
}
