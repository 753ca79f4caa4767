package file_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/core/push"
	"github.com/baremesh/baremesh/core/store"
	"github.com/baremesh/baremesh/sources/file"
)

// writeFleet writes n resources, ServiceEntries with 4 ports and
// WorkloadEntries 1:10, 100 resources per file.
func writeFleet(b *testing.B, dir string, n int) {
	var sb strings.Builder
	file, inFile := 0, 0
	flushFile := func() {
		if inFile == 0 {
			return
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%04d.yaml", file)), []byte(sb.String()), 0o644); err != nil {
			b.Fatal(err)
		}
		sb.Reset()
		file++
		inFile = 0
	}
	for i := 0; i < n; i++ {
		svc := i / 11
		if i%11 == 0 {
			fmt.Fprintf(&sb, `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: svc%d, namespace: ns%d}
spec:
  hosts: [svc%d.ns%d.mesh]
  ports:
  - {number: 80, name: http, protocol: HTTP}
  - {number: 7070, name: grpc, protocol: GRPC}
  - {number: 9090, name: tcp, protocol: TCP}
  - {number: 443, name: tls, protocol: TLS}
  resolution: STATIC
  workloadSelector: {labels: {app: svc%d}}
---
`, svc, svc%10, svc, svc%10, svc)
		} else {
			fmt.Fprintf(&sb, `apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: w%d, namespace: ns%d}
spec:
  address: 10.%d.%d.%d
  labels: {app: svc%d, version: v1}
---
`, i, svc%10, i>>16&255, i>>8&255, i&255, svc)
		}
		if inFile++; inFile == 100 {
			flushFile()
		}
	}
	flushFile()
}

type loaded struct {
	agg *store.Aggregate
	reg *model.Registry
	pc  *push.PushContext
}

// loadFirstSnapshot reads dir from scratch into a first PushContext.
func loadFirstSnapshot(b *testing.B, dir string) loaded {
	agg := store.NewAggregate()
	reg := model.NewRegistry(model.NewAllocator())
	p := push.NewPipeline(agg, reg, config.DefaultMeshConfig(), push.PipelineOptions{})
	agg.Subscribe(p.OnEvents)
	w := file.New(file.Options{Dirs: []string{dir}}, agg.AddSource("file"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = w.Run(ctx) }()
	synced := make(chan struct{})
	go func() {
		if agg.WaitSynced(ctx) == nil {
			close(synced)
		}
	}()
	done := make(chan struct{})
	go func() { p.Run(ctx, synced); close(done) }()
	<-p.Ready()
	pc := p.Current()
	cancel()
	<-done
	return loaded{agg: agg, reg: reg, pc: pc}
}

// BenchmarkFirstSnapshot10k: time and allocations from nothing to the
// first snapshot of 10,000 resources (target ≤ 2 s), and the heap the
// loaded state holds.
func BenchmarkFirstSnapshot10k(b *testing.B) {
	dir := b.TempDir()
	writeFleet(b, dir, 10000)
	b.ReportAllocs()
	b.ResetTimer()
	var l loaded
	for i := 0; i < b.N; i++ {
		l = loadFirstSnapshot(b, dir)
	}
	b.StopTimer()
	if n := len(l.pc.Services()); n != 910 {
		b.Fatalf("services = %d, want 910", n)
	}
	var before, after runtime.MemStats
	l = loaded{}
	runtime.GC()
	runtime.ReadMemStats(&before)
	l = loadFirstSnapshot(b, dir)
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "MB-held")
	runtime.KeepAlive(l)
}

// BenchmarkEditToEvent: from one file's write to the store's update event,
// coalescing off, over 200 edits: p50 and p99 (target p99 ≤ 50 ms).
func BenchmarkEditToEvent(b *testing.B) {
	dir := b.TempDir()
	writeFleet(b, dir, 1000)
	agg := store.NewAggregate()
	events := make(chan time.Time, 1)
	agg.Subscribe(func([]store.Event) {
		select {
		case events <- time.Now():
		default:
		}
	})
	w := file.New(file.Options{Dirs: []string{dir}}, agg.AddSource("file"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = w.Run(ctx) }()
	if err := agg.WaitSynced(ctx); err != nil {
		b.Fatal(err)
	}
	for len(events) > 0 {
		<-events
	}
	path := filepath.Join(dir, "edit.yaml")
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		lat := make([]time.Duration, 0, 200)
		for i := 0; i < 200; i++ {
			body := fmt.Sprintf("apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: edit, namespace: x}\nspec:\n  hosts: [edit.mesh]\n  ports: [{number: %d, name: http}]\n  resolution: DNS\n", 1000+i+n*200)
			tmp := path + ".tmp"
			if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
				b.Fatal(err)
			}
			start := time.Now()
			if err := os.Rename(tmp, path); err != nil {
				b.Fatal(err)
			}
			select {
			case at := <-events:
				lat = append(lat, at.Sub(start))
			case <-time.After(5 * time.Second):
				b.Fatalf("edit %d: no event within 5s", i)
			}
		}
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	}
}
