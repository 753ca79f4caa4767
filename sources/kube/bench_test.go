package kube_test

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/core/push"
	"github.com/baremesh/baremesh/core/store"
	"github.com/baremesh/baremesh/sources/kube"
	"github.com/baremesh/baremesh/sources/kube/kubetest"
)

const (
	benchServices    = 2000
	benchPodsPerSvc  = 5 // 10,000 pods
	benchNamespaces  = 20
	benchSetupWorker = 16
)

var benchOnce sync.Once

// benchCluster fills an API server of its own with 2,000 Services, their
// EndpointSlices and 10,000 running pods (once per process).
func benchCluster(b *testing.B) *kubetest.Cluster {
	c := cluster(b, "scale", false)
	benchOnce.Do(func() {
		start := time.Now()
		ctx := context.Background()
		work := make(chan int)
		var wg sync.WaitGroup
		var mu sync.Mutex
		var firstErr error
		for w := 0; w < benchSetupWorker; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range work {
					if err := benchService(ctx, c, i); err != nil {
						mu.Lock()
						if firstErr == nil {
							firstErr = err
						}
						mu.Unlock()
					}
				}
			}()
		}
		for n := 0; n < benchNamespaces; n++ {
			ensureNamespace(b, c, fmt.Sprintf("scale-%02d", n), nil)
		}
		for i := 0; i < benchServices; i++ {
			work <- i
		}
		close(work)
		wg.Wait()
		if firstErr != nil {
			b.Fatal(firstErr)
		}
		b.Logf("setup: %d Services, %d pods in %v", benchServices, benchServices*benchPodsPerSvc, time.Since(start).Round(time.Second))
	})
	return c
}

func benchService(ctx context.Context, c *kubetest.Cluster, i int) error {
	ns, name := fmt.Sprintf("scale-%02d", i%benchNamespaces), fmt.Sprintf("svc-%04d", i)
	labels := map[string]string{"app": name}
	if _, err := c.Client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Name: "http", Port: 80}, {Name: "grpc", Port: 9090}}},
	}, metav1.CreateOptions{}); err != nil {
		return err
	}
	sl := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name + "-1", Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(8080))}, {Name: ptr("grpc"), Port: ptr(int32(9090))}},
	}
	for p := 0; p < benchPodsPerSvc; p++ {
		ip := fmt.Sprintf("10.%d.%d.%d", 100+i/250, i%250, p+1)
		pod, err := c.Client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", name, p), Namespace: ns, Labels: labels},
			Spec:       corev1.PodSpec{ServiceAccountName: name, Containers: []corev1.Container{{Name: "app", Image: "x"}}},
		}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
		if _, err := c.Client.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
			return err
		}
		sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)},
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: pod.Name}})
	}
	_, err := c.Client.DiscoveryV1().EndpointSlices(ns).Create(ctx, sl, metav1.CreateOptions{})
	return err
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
		agg.Subscribe(func(evs []store.Event) { reg.Apply(evs) })
		src, err := kube.New(kube.Options{Dir: dir, Model: func(u model.KubeUpdate) { reg.ApplyKube(u) }, Logger: slog.New(slog.DiscardHandler)}, agg.AddSource("kube"))
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
