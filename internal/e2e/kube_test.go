package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/xds"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/baremesh/baremesh/core/testkit"
	"github.com/baremesh/baremesh/internal/daemonconfig"
	"github.com/baremesh/baremesh/sources/kube/kubetest"
)

// localIPv4 returns a non-loopback IPv4 address of this host.
func localIPv4(t *testing.T) string {
	t.Helper()
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			return n.IP.String()
		}
	}
	t.Skip("skipping: the host has no non-loopback IPv4 address, and EndpointSlices refuse loopback ones")
	return ""
}

// startBackendOn is startBackend listening on host.
func startBackendOn(t *testing.T, name, host string) *backend {
	t.Helper()
	b := &backend{name: name}
	lis, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	b.addr, b.port = lis.Addr().String(), lis.Addr().(*net.TCPAddr).Port
	s := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		b.mu.Lock()
		b.calls++
		b.mu.Unlock()
		_ = grpc.SetHeader(ctx, metadata.Pairs("backend", b.name))
		return h(ctx, req)
	}))
	healthpb.RegisterHealthServer(s, health.NewServer())
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	return b
}

// startKubeMesh is startMesh with a clusters directory.
func startKubeMesh(t *testing.T, files map[string]string, clusters string) *mesh {
	t.Helper()
	return startMeshWith(t, files, func(c *daemonconfig.Config) { c.Clusters = clusters })
}

// TestGRPCGoXDSClientMixedMesh: a real kube-apiserver holds a Service
// whose only pod endpoint exists as an EndpointSlice; a VM WorkloadEntry
// in a config file carries the Service's selector labels. grpc-go's xDS
// client, dialling the Service's Kubernetes name, reaches both; removing
// the slice's endpoint leaves the VM.
func TestGRPCGoXDSClientMixedMesh(t *testing.T) {
	kc := kubetest.Start(t, true)
	t.Cleanup(kc.Stop) // after the daemon stops (cleanups run last-in first-out)
	ctx := context.Background()
	// Kubernetes refuses loopback addresses in EndpointSlices: the pod
	// backend listens on the host's own non-loopback address (still local
	// traffic).
	hostIP := localIPv4(t)
	pod, vm := startBackendOn(t, "pod-1", hostIP), startBackend(t, "vm-1")

	ns := "mixed"
	if _, err := kc.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err := kc.Client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: ns},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "echo"},
			Ports: []corev1.ServicePort{{Name: "grpc", Port: 7070}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ready, podPort, name := true, int32(pod.port), "grpc"
	slice, err := kc.Client.DiscoveryV1().EndpointSlices(ns).Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "echo-1", Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: "echo"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{hostIP}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		Ports:       []discoveryv1.EndpointPort{{Name: &name, Port: &podPort}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Istio resources in the cluster: "echo" also exists as a file (the
	// file wins), "echo-kube" only in the cluster.
	drGVR := schema.GroupVersionResource{Group: "networking.istio.io", Version: "v1", Resource: "destinationrules"}
	for _, n := range []string{"echo", "echo-kube"} {
		dr := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "networking.istio.io/v1", "kind": "DestinationRule",
			"metadata": map[string]any{"name": n, "namespace": ns},
			"spec":     map[string]any{"host": "echo.mixed.svc.cluster.local", "trafficPolicy": map[string]any{"loadBalancer": map[string]any{"simple": "ROUND_ROBIN"}}},
		}}
		if _, err := kc.Dyn.Resource(drGVR).Namespace(ns).Create(ctx, dr, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	clusters := t.TempDir()
	if err := os.WriteFile(filepath.Join(clusters, "k1.yaml"), kc.Kubeconfig(t, "baremesh", nil), 0o600); err != nil {
		t.Fatal(err)
	}
	m := startKubeMesh(t, map[string]string{"vm.yaml": fmt.Sprintf(`apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: vm-1, namespace: mixed}
spec:
  address: 127.0.0.1
  ports: {grpc: %d}
  labels: {app: echo}
  serviceAccount: echo-vm
`, vm.port), "dr.yaml": `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: echo, namespace: mixed}
spec:
  host: echo.mixed.svc.cluster.local
  trafficPolicy: {loadBalancer: {simple: ROUND_ROBIN}}
`}, clusters)

	res, err := xds.NewXDSResolverWithConfigForTesting(m.bootstrap("sidecar~127.0.0.1~client.default~default.svc.cluster.local"))
	if err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient("xds:///echo.mixed.svc.cluster.local:7070", grpc.WithResolvers(res), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	seen := map[string]int{}
	testkit.Eventually(t, "RPCs reaching the EndpointSlice's pod and the selected VM", func() bool {
		if b, err := call(ctx, cc); err == nil {
			seen[b]++
		}
		return seen["pod-1"] > 0 && seen["vm-1"] > 0
	})
	t.Logf("answered by: %v", seen)
	var cz struct {
		Resources []struct {
			Kind, Name string
			Source     struct{ Name string }
		}
		Conflicts []struct {
			Winner string
			Losers []string
		}
		Clusters []struct {
			ID        string `json:"id"`
			Connected bool   `json:"connected"`
			Synced    bool   `json:"synced"`
			Services  int    `json:"services"`
		} `json:"clusters"`
	}
	getJSON(t, "http://"+m.d.HTTPAddr()+"/debug/configz", &cz)
	if len(cz.Clusters) != 1 || cz.Clusters[0].ID != "k1" || !cz.Clusters[0].Connected || !cz.Clusters[0].Synced || cz.Clusters[0].Services < 1 {
		t.Fatalf("/debug/configz clusters = %+v", cz.Clusters)
	}
	// Precedence: the file's DestinationRule wins over the cluster's.
	sources := map[string]string{}
	for _, r := range cz.Resources {
		if r.Kind == "DestinationRule" {
			sources[r.Name] = r.Source.Name
		}
	}
	if !strings.HasPrefix(sources["echo"], "file:") || sources["echo-kube"] != "kube:k1" {
		t.Fatalf("DestinationRule sources = %v; want echo from the file, echo-kube from cluster k1", sources)
	}
	if len(cz.Conflicts) != 1 || !strings.HasPrefix(cz.Conflicts[0].Winner, "file:") || len(cz.Conflicts[0].Losers) != 1 || cz.Conflicts[0].Losers[0] != "kube" {
		t.Fatalf("conflicts = %+v; want the file over kube", cz.Conflicts)
	}

	// The pod leaves the slice: all traffic to the VM.
	slice.Endpoints = nil
	if _, err := kc.Client.DiscoveryV1().EndpointSlices(ns).Update(ctx, slice, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	allTo(t, ctx, cc, "vm-1")
}
