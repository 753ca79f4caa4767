package push_test

import (
	"context"
	"strings"
	"testing"
	"time"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/config/configtest"
	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/core/push"
	"github.com/baremesh/baremesh/core/store"
	"github.com/baremesh/baremesh/core/testkit"
)

const webHost = "web.ns.svc.cluster.local"

// seWeb is a ServiceEntry (a file's) for the hostname of Kubernetes
// Service ns/web.
const seWeb = `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: squat, namespace: ns}
spec:
  hosts: [web.ns.svc.cluster.local]
  addresses: [240.0.0.9]
  ports: [{number: 9999, name: tcp, protocol: TCP}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.9}]
`

func kubeWeb(eps ...string) *model.KubeService {
	s := &model.Service{Hostname: webHost, Namespace: "ns", Addresses: []string{"10.96.0.1"},
		Ports: []model.Port{{Name: "http", Number: 80, Protocol: model.HTTP}}}
	ks := &model.KubeService{Name: "web", Service: s}
	for _, a := range eps {
		ks.Endpoints = append(ks.Endpoints, &model.Endpoint{Address: a, Port: 80, ServicePortName: "http", Weight: 1, Healthy: true})
	}
	return ks
}

// oneWay is a running pipeline over a memory store (the file source's
// stand-in: the store is the same one the file source feeds) with the
// requests it published.
type oneWay struct {
	mem  *store.Memory
	reg  *model.Registry
	p    *push.Pipeline
	reqs chan *push.Request
}

func newOneWay(t *testing.T) *oneWay {
	w := &oneWay{mem: store.NewMemory(), reg: model.NewRegistry(model.NewAllocator()), reqs: make(chan *push.Request, 100)}
	w.p = push.NewPipeline(w.mem, w.reg, config.DefaultMeshConfig(), push.PipelineOptions{Debounce: time.Millisecond, EndpointsBypassDebounce: true})
	w.mem.Subscribe(w.p.OnEvents)
	w.p.AddListener(func(_ *push.PushContext, r *push.Request) { w.reqs <- r })
	ctx, cancel := context.WithCancel(context.Background())
	synced := make(chan struct{})
	close(synced)
	done := make(chan struct{})
	go func() { defer close(done); w.p.Run(ctx, synced) }()
	t.Cleanup(func() { cancel(); <-done })
	w.next(t) // the initial snapshot
	return w
}

func (w *oneWay) next(t *testing.T) *push.Request {
	t.Helper()
	select {
	case r := <-w.reqs:
		return r
	case <-time.After(time.Minute): // a hang guard: a push comes within the debounce
		t.Fatal("no push within a minute")
	}
	return nil
}

// web is the snapshot's service for webHost in ns and its endpoints.
func (w *oneWay) web(t *testing.T) (*model.Service, []string) {
	t.Helper()
	pc := w.p.Current()
	s := pc.Service(webHost, "ns")
	if s == nil {
		t.Fatalf("no service %s in ns; services: %v", webHost, pc.Services())
	}
	var eps []string
	for _, e := range pc.Endpoints.Endpoints(s.Key()) {
		eps = append(eps, e.Address)
	}
	return s, eps
}

// TestKubernetesAndFileForOneHost: a Kubernetes Service and a file's
// ServiceEntry for the same hostname and namespace, arriving in either
// order through the one way in, give the same model: istiod's precedence
// (pilot/pkg/model initServiceRegistry: a Kubernetes Service over a
// ServiceEntry, so nobody squats its hostname) defines the service, and
// the endpoints of both are merged, as istiod's endpoint shards are.
func TestKubernetesAndFileForOneHost(t *testing.T) {
	for _, kubeFirst := range []bool{true, false} {
		name := map[bool]string{true: "kube first", false: "file first"}[kubeFirst]
		t.Run(name, func(t *testing.T) {
			w := newOneWay(t)
			kube := func() {
				w.p.OnKube(model.KubeUpdate{Cluster: "c1", Full: true, Services: []*model.KubeService{kubeWeb("10.1.0.1")}})
			}
			file := func() { w.mem.Apply([]config.Config{configtest.Typed(t, seWeb)}, nil) }
			if kubeFirst {
				kube()
				w.next(t)
				file()
			} else {
				file()
				w.next(t)
				kube()
			}
			if r := w.next(t); !r.Full {
				t.Fatalf("second source for the host: want a full push, got %+v", r)
			}
			s, eps := w.web(t)
			if s.Source.Kind != model.KindKubeService || len(s.Ports) != 1 || s.Ports[0].Number != 80 || s.Addresses[0] != "10.96.0.1" {
				t.Fatalf("service = %+v (from %s); want the Kubernetes Service's definition (port 80, 10.96.0.1)", s, s.Source)
			}
			if strings.Join(eps, ",") != "10.0.0.9,10.1.0.1" && strings.Join(eps, ",") != "10.1.0.1,10.0.0.9" {
				t.Fatalf("endpoints = %v; want both sources' (10.1.0.1, 10.0.0.9)", eps)
			}
		})
	}
}

// TestBadInputKeepsTheLastGoodState: an input the model cannot read, from
// either kind of source, changes nothing (before, both panicked the
// daemon): the last good version stays in the snapshot, the model's
// problems name the resource and the reason, and a good version clears
// the problem.
func TestBadInputKeepsTheLastGoodState(t *testing.T) {
	w := newOneWay(t)
	good := configtest.Typed(t, seWeb)
	w.mem.Apply([]config.Config{good}, nil)
	w.p.OnKube(model.KubeUpdate{Cluster: "c1", Full: true, Services: []*model.KubeService{kubeWeb("10.1.0.1")}})
	testkit.Eventually(t, "the snapshot has both sources", func() bool {
		s := w.p.Current().Service(webHost, "ns")
		return s != nil && s.Source.Kind == model.KindKubeService
	})

	// A Kubernetes full resync with the Service converted without its
	// hostname, and one with no Service at all.
	bad := kubeWeb("10.1.0.2")
	bad.Service.Hostname = ""
	w.p.OnKube(model.KubeUpdate{Cluster: "c1", Full: true, Services: []*model.KubeService{bad, {Name: "web"}}})
	// A ServiceEntry event whose spec is not a ServiceEntry.
	wrong := good
	wrong.Spec = &networking.WorkloadEntry{Address: "10.0.0.10"}
	w.mem.Apply([]config.Config{wrong}, nil)

	s, eps := w.web(t)
	if s.Source.Kind != model.KindKubeService || strings.Join(eps, ",") != "10.0.0.9,10.1.0.1" && strings.Join(eps, ",") != "10.1.0.1,10.0.0.9" {
		t.Fatalf("after bad input: service from %s, endpoints %v; want the last good state (Kubernetes', 10.1.0.1 and 10.0.0.9)", s.Source, eps)
	}
	problems := map[string]string{}
	for _, p := range w.reg.Problems() {
		problems[p.Resource] = p.Error
	}
	for res, reason := range map[string]string{
		"KubernetesService/ns/c1/web": "no hostname",
		"KubernetesService//c1/web":   "no namespace or name",
		"ServiceEntry/ns/squat":       "not a ServiceEntry",
	} {
		if !strings.Contains(problems[res], reason) || !strings.Contains(problems[res], "last good version stays") {
			t.Errorf("problem of %s = %q; want %q and that the last good version stays (all: %v)", res, problems[res], reason, problems)
		}
	}

	// Good versions clear the problems and take effect.
	w.p.OnKube(model.KubeUpdate{Cluster: "c1", Full: true, Services: []*model.KubeService{kubeWeb("10.1.0.3")}})
	testkit.Eventually(t, "the good version after the bad one is served", func() bool {
		_, eps := w.web(t)
		return strings.Contains(strings.Join(eps, ","), "10.1.0.3")
	})
	w.mem.Apply([]config.Config{good}, nil)
	for _, p := range w.reg.Problems() {
		t.Errorf("problem left after good versions: %+v", p)
	}
}
