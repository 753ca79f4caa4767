package generation

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"

	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/core/push"
	"github.com/baremesh/baremesh/core/store"
	"github.com/baremesh/baremesh/core/testkit"
	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/gentest"
	"github.com/baremesh/baremesh/xdsserver/wire"
	"github.com/baremesh/baremesh/xdsserver/xdstype"
)

// In assert mode a whole-subscription hit is checked against its
// clusters: a wrong cached list is reported.
func TestEDSListCacheAssert(t *testing.T) {
	var mismatch []string
	b := New(Options{CacheAssert: true, OnCacheMismatch: func(m string) { mismatch = append(mismatch, m) }})
	pc := push.Build(nil, push.Inputs{Store: store.NewMemory(), Registry: model.NewRegistry(model.NewAllocator())}, nil, time.Now())
	typ := xdstype.Endpoint.With(func(in gen.Input) ([]gen.Resource, error) {
		var out []gen.Resource
		for _, n := range in.Names {
			out = append(out, gen.Resource{Name: n, Resource: &endpointv3.ClusterLoadAssignment{ClusterName: n}})
		}
		return out, nil
	})
	names := []string{"outbound|80||a.mesh", "outbound|80||b.mesh"}
	list := (&wire.Lists{}).Get(wire.NamesHash(names), names)
	build := func(id string) {
		t.Helper()
		p := &model.Proxy{ID: id, Type: model.SidecarProxy, Namespace: "ns", Labels: map[string]string{}}
		if _, _, err := b.Build(pc, typ, p, list.Names, list, nil); err != nil {
			t.Fatal(err)
		}
	}
	build("a")
	build("b")
	if len(mismatch) != 0 {
		t.Fatalf("assertion reports before the list was spoiled: %v", mismatch)
	}
	b.eds.mu.Lock()
	for k, res := range b.eds.lists {
		b.eds.lists[k] = []*wire.Resource{res[1], res[0]} // a wrong list under the right key
	}
	b.eds.mu.Unlock()
	build("c")
	if len(mismatch) != 1 || !strings.Contains(mismatch[0], "whole subscription") {
		t.Fatalf("assertion reports = %v, want one about the whole subscription", mismatch)
	}
}

// TestEDSCacheKeepsTheNewestGeneration: endpoint-only changes keep the
// snapshot; each cluster's entry is replaced by the newer generation
// instead of piling up until the next full push.
func TestEDSCacheKeepsTheNewestGeneration(t *testing.T) {
	c := &edsCache{}
	k := edsKey{cluster: "outbound|80||a.mesh", push: 1}
	for gen := range uint64(100) {
		k.endpoints = gen
		if _, ok := c.get(k); ok {
			t.Fatalf("generation %d cached before it was put", gen)
		}
		c.put(k, &wire.Resource{Name: k.cluster})
	}
	if len(c.m) != 1 {
		t.Errorf("%d entries cached for one cluster, want 1", len(c.m))
	}
	k.endpoints = 50
	c.put(k, &wire.Resource{Name: k.cluster}) // an older generation finishing late
	if _, ok := c.get(edsKey{cluster: k.cluster, push: 1, endpoints: 99}); !ok || len(c.m) != 1 {
		t.Errorf("the newest generation was replaced by an older one")
	}
}

// TestWildcardEDSGeneratedOnceByConcurrentStreams (issue #30): streams
// asking for the same wildcard EDS at once (a push reaching a hundred
// streams that ask for every endpoint) wait for one generation instead of
// each running its own in a generation slot, which kept a well-behaved
// proxy waiting behind them.
func TestWildcardEDSGeneratedOnceByConcurrentStreams(t *testing.T) {
	const streams = 8
	b := New(Options{MaxConcurrent: streams})
	// The test counts generations: assert mode (BAREMESH_CACHE_ASSERT=1,
	// as make test runs) regenerates on every hit, one more per waiter.
	b.assert = false
	pc := push.Build(nil, push.Inputs{Store: store.NewMemory(), Registry: model.NewRegistry(model.NewAllocator())}, nil, time.Now())
	var gens atomic.Int64
	release := make(chan struct{})
	typ := xdstype.Endpoint.With(func(in gen.Input) ([]gen.Resource, error) {
		gens.Add(1)
		<-release // held until every other stream waits for this generation
		return []gen.Resource{{Name: "outbound|80||a.mesh", Resource: &endpointv3.ClusterLoadAssignment{ClusterName: "outbound|80||a.mesh"}}}, nil
	})
	results := make(chan []*wire.Resource, streams)
	for i := range streams {
		go func() {
			p := &model.Proxy{ID: fmt.Sprintf("slow-%d", i), Type: model.SidecarProxy, Namespace: "ns", Labels: map[string]string{}}
			res, _, err := b.Build(pc, typ, p, nil, nil, nil)
			if err != nil {
				t.Error(err)
			}
			results <- res
		}()
	}
	waits := func() uint64 {
		b.eds.mu.Lock()
		defer b.eds.mu.Unlock()
		return b.eds.waits
	}
	testkit.EventuallyWithin(t, time.Minute, "every other stream waits for the one generation", func() bool {
		return waits() == streams-1 || gens.Load() > 1
	})
	close(release)
	first := <-results
	for range streams - 1 {
		if res := <-results; len(res) != 1 || res[0] != first[0] {
			t.Errorf("a waiting stream got %v, want the shared %v", res, first)
		}
	}
	if g := gens.Load(); g != 1 {
		t.Errorf("%d concurrent wildcard EDS streams of one key: %d generations, want 1", streams, g)
	}
}

// BenchmarkEDSColdSubscription: the first proxy's EDS on a fresh cache
// (every cluster of the 200 services of vmFleet, 400 clusters, each
// generated on its own as the cache asks: a new snapshot, a connect).
func BenchmarkEDSColdSubscription(b *testing.B) {
	conf, proxies := vmFleet(b)
	pc, err := gentest.Build([]byte(conf))
	if err != nil {
		b.Fatal(err)
	}
	var names []string
	for _, s := range pc.Services() {
		for _, p := range s.Ports {
			names = append(names, gen.ClusterName(gen.Outbound, p.Number, "", s.Hostname))
		}
	}
	for b.Loop() {
		res, _, err := New(Options{}).Build(pc, xdstype.Endpoint, proxies[0], names, nil, nil)
		if err != nil || len(res) != len(names) {
			b.Fatalf("%d of %d clusters (err %v)", len(res), len(names), err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*len(names)), "µs/cluster")
}
