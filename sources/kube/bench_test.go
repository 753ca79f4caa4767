package kube_test

import (
	"context"
	"log/slog"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/core/push"
	"github.com/baremesh/baremesh/core/store"
	"github.com/baremesh/baremesh/sources/kube"
	"github.com/baremesh/baremesh/sources/kube/kubetest"
)

const (
	benchServices   = 2000
	benchPodsPerSvc = 5 // 10,000 pods
	benchNamespaces = 20
)

var benchOnce sync.Once

// benchCluster fills an API server of its own with 2,000 Services, their
// EndpointSlices and 10,000 running pods (once per process).
func benchCluster(b *testing.B) *kubetest.Cluster {
	c := cluster(b, "scale", false)
	benchOnce.Do(func() {
		start := time.Now()
		if err := c.Fill(context.Background(), kubetest.Scale{Services: benchServices, PodsPerService: benchPodsPerSvc, Namespaces: benchNamespaces}); err != nil {
			b.Fatal(err)
		}
		b.Logf("setup: %d Services, %d pods in %v", benchServices, benchServices*benchPodsPerSvc, time.Since(start).Round(time.Second))
	})
	return c
}

// BenchmarkFirstSnapshot10kPods: from the source's start to the first
// snapshot (informers synced, 2,000 Services with 20,000 endpoints in the
// model, the PushContext built), and the heap the source and model hold.
func BenchmarkFirstSnapshot10kPods(b *testing.B) {
	if kubetest.Assets() == "" {
		b.Skip("no kube-apiserver/etcd")
	}
	c := benchCluster(b)
	dir := b.TempDir()
	writeKubeconfig(b, dir, "scale", c.Kubeconfig(b, "bench", nil))
	var held uint64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		agg, reg := store.NewAggregate(), model.NewRegistry(model.NewAllocator())
		agg.Subscribe(func(evs []store.Event) { reg.Apply(model.Update{Events: evs}) })
		src, err := kube.New(kube.Options{Dir: dir, Model: func(u model.KubeUpdate) { reg.Apply(model.Update{Kube: &u}) }, Logger: slog.New(slog.DiscardHandler)}, agg.AddSource("kube"))
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = src.Run(ctx) }()
		wctx, wcancel := context.WithTimeout(ctx, 5*time.Minute)
		if err := agg.WaitSynced(wctx); err != nil {
			b.Fatal(err)
		}
		wcancel()
		pc := push.Build(nil, push.Inputs{Store: agg, Registry: reg, Mesh: config.DefaultMeshConfig()}, nil, time.Now())
		eps := 0
		for _, s := range pc.Services() {
			eps += len(reg.Endpoints().Endpoints(s.Key()))
		}
		if want := benchServices*benchPodsPerSvc*2 + 2; len(pc.Services()) < benchServices || eps < want-2 {
			b.Fatalf("snapshot: %d services, %d endpoints; want %d and %d", len(pc.Services()), eps, benchServices, want)
		}
		b.StopTimer()
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		held = after.HeapAlloc - before.HeapAlloc
		runtime.KeepAlive(pc)
		cancel()
		<-done
		b.StartTimer()
	}
	b.ReportMetric(float64(held)/(1<<20), "MB-held")
}
