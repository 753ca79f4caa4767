package kube_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/core/store"
	"github.com/baremesh/baremesh/sources/kube"
	"github.com/baremesh/baremesh/sources/kube/kubetest"
	"github.com/baremesh/baremesh/sources/sourcetest"
)

// harness drives the conformance suite through a real API server: a unit
// is a set of ServiceEntries in namespace "test".
type harness struct {
	c     *kubetest.Cluster
	dir   string
	mu    sync.Mutex
	units map[string][]string // unit -> names
}

func (h *harness) Start(t *testing.T, sink store.Sink) func() {
	opts := fastOptions()
	opts.Dir = h.dir
	opts.Model = func(model.KubeUpdate) {}
	src, err := kube.New(opts, sink)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = src.Run(ctx) }()
	var once sync.Once
	return func() { once.Do(func() { cancel(); <-done }) }
}

func (h *harness) Put(t *testing.T, unit, manifests string) {
	var names []string
	for _, u := range applyYAML(t, h.c, manifests) {
		names = append(names, u.GetName())
	}
	h.mu.Lock()
	h.units[unit] = names
	h.mu.Unlock()
}

// PutBad stores a ServiceEntry the CRD's schema accepts and Istio's
// validation refuses (an address that is no IP).
func (h *harness) PutBad(t *testing.T, unit string) {
	h.mu.Lock()
	names := h.units[unit]
	h.mu.Unlock()
	for _, n := range names {
		applyYAML(t, h.c, `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: `+n+`, namespace: test}
spec:
  hosts: [`+n+`.example.com]
  addresses: [not-an-ip]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: DNS
`)
	}
}

func (h *harness) Delete(t *testing.T, unit string) {
	h.mu.Lock()
	names := h.units[unit]
	delete(h.units, unit)
	h.mu.Unlock()
	for _, n := range names {
		if err := h.c.Dyn.Resource(seGVR).Namespace("test").Delete(context.Background(), n, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

func (h *harness) Coalesces() bool { return false }

func TestConformance(t *testing.T) {
	c := cluster(t, "a", true)
	ensureNamespace(t, c, "test", nil)
	dir := t.TempDir()
	writeKubeconfig(t, dir, "a", c.Kubeconfig(t, "conformance", nil))
	sourcetest.Timeout = 20 * time.Second
	sourcetest.Run(t, func(t *testing.T) sourcetest.Harness {
		// Each case starts from an empty namespace.
		if err := c.Dyn.Resource(seGVR).Namespace("test").DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
			t.Fatal(err)
		}
		poll(t, "namespace test to be empty", func() bool {
			l, err := c.Dyn.Resource(seGVR).Namespace("test").List(context.Background(), metav1.ListOptions{})
			return err == nil && len(l.Items) == 0
		})
		return &harness{c: c, dir: dir, units: map[string][]string{}}
	})
}

func TestMissingKubeconfigDirIsNotFatal(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "later")
	e := startEnv(t, dir, fastOptions())
	if st := e.src.Status(); len(st) != 0 {
		t.Fatalf("status = %+v", st)
	}
	c := cluster(t, "a", true)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeKubeconfig(t, dir, "a", c.Kubeconfig(t, "later", nil))
	poll(t, "the cluster of a directory made after start", func() bool {
		st := e.src.Status()
		return len(st) == 1 && st[0].Synced && st[0].Connected
	})

	// a.conf claims the ID of a.yaml (and sorts first): refused, a.yaml
	// keeps the cluster; its removal clears the problem.
	dup := filepath.Join(dir, "a.conf")
	if err := os.WriteFile(dup, c.Kubeconfig(t, "dup", nil), 0o600); err != nil {
		t.Fatal(err)
	}
	origin := func() bool {
		for _, p := range e.agg.Problems() {
			if p.Origin == dup && strings.Contains(p.Error, "already taken") {
				return true
			}
		}
		return false
	}
	poll(t, "the duplicate cluster ID reported", origin)
	for _, st := range e.src.Status() {
		if st.File == filepath.Join(dir, "a.yaml") && (!st.Synced || !st.Connected) || st.File == dup && st.Error == "" {
			t.Fatalf("status = %+v; a.yaml should keep cluster a, a.conf be refused", e.src.Status())
		}
	}
	if err := os.Remove(dup); err != nil {
		t.Fatal(err)
	}
	poll(t, "the duplicate's problem cleared", func() bool { return !origin() })
}
