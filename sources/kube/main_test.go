package kube_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/core/store"
	"github.com/baremesh/baremesh/core/testkit"
	"github.com/baremesh/baremesh/sources/kube"
	"github.com/baremesh/baremesh/sources/kube/kubetest"
)

var (
	sharedMu sync.Mutex
	shared   = map[string]*kubetest.Cluster{}
)

func TestMain(m *testing.M) {
	code := m.Run()
	for _, c := range shared {
		c.Stop()
	}
	os.Exit(code)
}

// cluster returns the package's API server named name, started on first
// use (with Istio's CRDs when istio).
func cluster(t testing.TB, name string, istio bool) *kubetest.Cluster {
	t.Helper()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if c := shared[name]; c != nil {
		return c
	}
	c := kubetest.Start(t, istio)
	shared[name] = c
	return c
}

// env is a running source over a kubeconfig directory, feeding an
// aggregate store and a service registry, counting what they raise.
type env struct {
	dir string
	src *kube.Source
	agg *store.Aggregate
	reg *model.Registry

	mu       sync.Mutex
	events   []store.Event
	changes  []model.Change
	stop     func()
	stopOnce sync.Once
}

func fastOptions() kube.Options {
	return kube.Options{Rescan: 100 * time.Millisecond, CRDPoll: 200 * time.Millisecond, Probe: 100 * time.Millisecond, SyncTimeout: 20 * time.Second}
}

func startEnv(t *testing.T, dir string, opts kube.Options) *env {
	t.Helper()
	e := &env{dir: dir, agg: store.NewAggregate(), reg: model.NewRegistry(model.NewAllocator())}
	sink := e.agg.AddSource("kube")
	e.agg.Subscribe(func(evs []store.Event) {
		ch := e.reg.Apply(model.Update{Events: evs}) // what the push pipeline does
		e.mu.Lock()
		e.events = append(e.events, evs...)
		if !ch.Empty() {
			e.changes = append(e.changes, ch)
		}
		e.mu.Unlock()
	})
	opts.Dir = dir
	opts.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	opts.Model = func(u model.KubeUpdate) {
		ch := e.reg.Apply(model.Update{Kube: &u})
		if !ch.Empty() {
			e.mu.Lock()
			e.changes = append(e.changes, ch)
			e.mu.Unlock()
		}
	}
	src, err := kube.New(opts, sink)
	if err != nil {
		t.Fatal(err)
	}
	e.src = src
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = src.Run(ctx) }()
	e.stop = func() { e.stopOnce.Do(func() { cancel(); <-done }) }
	t.Cleanup(e.stop)
	wctx, wcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer wcancel()
	if err := e.agg.WaitSynced(wctx); err != nil {
		t.Fatalf("source never synced: %v", err)
	}
	return e
}

// testWriter sends logs to t.Log (until the test ends).
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	defer func() { _ = recover() }() // a log line after the test ended
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func (e *env) counts() (events, changes int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.events), len(e.changes)
}

func writeKubeconfig(t testing.TB, dir, id string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, id+".yaml")
	tmp := filepath.Join(dir, "."+id+".tmp")
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, p); err != nil {
		t.Fatal(err)
	}
	return p
}

func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	pollFor(t, 30*time.Second, what, cond)
}

func pollFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	testkit.EventuallyWithin(t, d, what, cond)
}

func ensureNamespace(t testing.TB, c *kubetest.Cluster, ns string, labels map[string]string) {
	t.Helper()
	_, err := c.Client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

var seGVR = schema.GroupVersionResource{Group: "networking.istio.io", Version: "v1", Resource: "serviceentries"}

// applyYAML creates or updates each document of manifests through the
// dynamic client (Istio kinds only: the resource is the kind's plural).
func applyYAML(t *testing.T, c *kubetest.Cluster, manifests string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, doc := range strings.Split(manifests, "\n---") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatalf("test manifest: %v", err)
		}
		gv, _ := schema.ParseGroupVersion(u.GetAPIVersion())
		gvr := gv.WithResource(strings.ToLower(u.GetKind()) + "s")
		if strings.HasSuffix(u.GetKind(), "y") {
			gvr.Resource = strings.ToLower(strings.TrimSuffix(u.GetKind(), "y")) + "ies"
		}
		ri := c.Dyn.Resource(gvr).Namespace(u.GetNamespace())
		ctx := context.Background()
		cur, err := ri.Get(ctx, u.GetName(), metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = ri.Create(ctx, u, metav1.CreateOptions{})
		case err == nil:
			u.SetResourceVersion(cur.GetResourceVersion())
			_, err = ri.Update(ctx, u, metav1.UpdateOptions{})
		}
		if err != nil {
			t.Fatalf("applying %s %s/%s: %v", u.GetKind(), u.GetNamespace(), u.GetName(), err)
		}
		out = append(out, u)
	}
	return out
}

func kubetestCRDs() (string, error) { return kubetest.IstioCRDs() }

// changesOutside counts the model changes that touched a service outside
// namespace ns.
func (e *env) changesOutside(ns string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, ch := range e.changes {
		for _, m := range []map[model.ServiceKey]bool{ch.Services, ch.Endpoints} {
			for k := range m {
				if k.Namespace != ns {
					n++
					goto next
				}
			}
		}
	next:
	}
	return n
}

func serviceKey(host, ns string) model.ServiceKey {
	return model.ServiceKey{Hostname: host, Namespace: ns}
}
