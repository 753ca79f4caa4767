package file_test

import (
	"context"
	networking "istio.io/api/networking/v1alpha3"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/store"
	"github.com/baremesh/baremesh/core/testkit"
	"github.com/baremesh/baremesh/sources/file"
	"github.com/baremesh/baremesh/sources/sourcetest"
)

type harness struct {
	dir  string
	opts file.Options
}

func (h *harness) Start(t *testing.T, sink store.Sink) func() {
	opts := h.opts
	opts.Dirs = []string{h.dir}
	w := file.New(opts, sink)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := w.Run(ctx); err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { cancel(); wg.Wait() }) }
}

func (h *harness) Put(t *testing.T, unit, manifests string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(h.dir, unit+".yaml"), []byte(manifests), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (h *harness) PutBad(t *testing.T, unit string) {
	h.Put(t, unit, "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: x\n")
}

func (h *harness) Delete(t *testing.T, unit string) {
	t.Helper()
	if err := os.Remove(filepath.Join(h.dir, unit+".yaml")); err != nil {
		t.Fatal(err)
	}
}

func (h *harness) Coalesces() bool { return h.opts.Coalesce > 0 }

func TestConformance(t *testing.T) {
	sourcetest.Run(t, func(t *testing.T) sourcetest.Harness {
		return &harness{dir: t.TempDir(), opts: file.Options{Coalesce: 30 * time.Millisecond}}
	})
}

func TestConformanceNoCoalescing(t *testing.T) {
	sourcetest.Run(t, func(t *testing.T) sourcetest.Harness {
		return &harness{dir: t.TempDir()}
	})
}

// running is a watcher over dirs feeding a fresh aggregate.
type running struct {
	agg  *store.Aggregate
	stop func()
}

func run(t *testing.T, opts file.Options) *running {
	t.Helper()
	agg := store.NewAggregate()
	w := file.New(opts, agg.AddSource("file"))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	stop := func() { cancel(); <-done }
	t.Cleanup(stop)
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer wcancel()
	if err := agg.WaitSynced(wctx); err != nil {
		t.Fatal(err)
	}
	return &running{agg: agg, stop: stop}
}

func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testkit.Eventually(t, what, cond)
}

func (r *running) port(name string) int {
	c, ok := r.agg.Get(config.ServiceEntry, "test", name)
	if !ok {
		return 0
	}
	return int(c.Spec.(*networking.ServiceEntry).GetPorts()[0].GetNumber())
}

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (r *running) problemFor(path string) string {
	var msgs []string
	for _, p := range r.agg.Problems() {
		if p.Origin == path {
			msgs = append(msgs, p.Error)
		}
	}
	return strings.Join(msgs, "; ")
}
