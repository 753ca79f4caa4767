package kube_test

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/sources/kube/kubetest"
)

func ptr[T any](v T) *T { return &v }

// kubeObjects creates, in namespace ns of c, a node with topology labels,
// a pod on it, a Service "reviews" and an EndpointSlice listing the pod
// (a bare API server runs no controllers: the test writes what the
// EndpointSlice controller and the kubelet would).
func kubeObjects(t *testing.T, c *kubetest.Cluster, ns, podIP string) {
	t.Helper()
	ctx := context.Background()
	ensureNamespace(t, c, ns, map[string]string{"mesh": "on"})
	node := "node-" + ns
	_, err := c.Client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, Labels: map[string]string{
		"topology.kubernetes.io/region": "eu", "topology.kubernetes.io/zone": "eu-a", "topology.istio.io/subzone": "rack1"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod, err := c.Client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "reviews-0", Namespace: ns, Labels: map[string]string{"app": "reviews", "version": "v2"}},
		Spec:       corev1.PodSpec{NodeName: node, ServiceAccountName: "bookinfo-reviews", Containers: []corev1.Container{{Name: "app", Image: "x"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: podIP, PodIPs: []corev1.PodIP{{IP: podIP}},
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	if _, err := c.Client.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = c.Client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "reviews", Namespace: ns},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "reviews"}, Ports: []corev1.ServicePort{
			{Name: "http-web", Port: 9080, TargetPort: intstr.FromInt32(8080)},
			{Name: "api", Port: 9090, AppProtocol: ptr("grpc")},
			{Name: "tcp-db", Port: 5432},
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Client.DiscoveryV1().EndpointSlices(ns).Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "reviews-abc", Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: "reviews"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{podIP}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}, NodeName: ptr(node),
				TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "reviews-0"}},
			{Addresses: []string{"10.244.9.9"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(false)}, Zone: ptr("eu-b")},
		},
		Ports: []discoveryv1.EndpointPort{{Name: ptr("http-web"), Port: ptr(int32(8080))}, {Name: ptr("api"), Port: ptr(int32(9090))}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

func TestServicesEndpointSlicesPodsNodes(t *testing.T) {
	c := cluster(t, "a", true)
	ns := "svc-basic"
	kubeObjects(t, c, ns, "10.244.1.5")
	dir := t.TempDir()
	writeKubeconfig(t, dir, "east", c.Kubeconfig(t, "svc", nil))
	e := startEnv(t, dir, fastOptions())

	sk := model.ServiceKey{Hostname: "reviews." + ns + ".svc.cluster.local", Namespace: ns}
	var svc *model.Service
	poll(t, "the Service in the model", func() bool {
		for _, s := range e.reg.Services() {
			if s.Key() == sk {
				svc = s
			}
		}
		return svc != nil
	})
	cur, _ := c.Client.CoreV1().Services(ns).Get(context.Background(), "reviews", metav1.GetOptions{})
	if len(svc.Addresses) != 1 || svc.Addresses[0] != cur.Spec.ClusterIP || svc.Resolution != model.ClientSideLB {
		t.Fatalf("service addresses %v resolution %v, want the ClusterIP %s", svc.Addresses, svc.Resolution, cur.Spec.ClusterIP)
	}
	protos := map[string]model.Protocol{}
	for _, p := range svc.Ports {
		protos[p.Name] = p.Protocol
	}
	if protos["http-web"] != model.HTTP || protos["api"] != model.GRPC || protos["tcp-db"] != model.TCP {
		t.Fatalf("port protocols = %v (want HTTP from the name, GRPC from appProtocol, TCP from the name)", protos)
	}
	eps := e.reg.Endpoints().Endpoints(sk)
	byKey := map[string]*model.Endpoint{}
	for _, ep := range eps {
		byKey[fmt.Sprintf("%s:%d", ep.Address, ep.Port)] = ep
	}
	if len(eps) != 4 {
		t.Fatalf("endpoints = %d (%v), want 2 addresses x 2 slice ports", len(eps), byKey)
	}
	pe := byKey["10.244.1.5:8080"]
	if pe == nil || pe.ServicePortName != "http-web" || pe.Labels["version"] != "v2" || pe.ServiceAccount != "bookinfo-reviews" ||
		pe.Locality != "eu/eu-a/rack1" || !pe.Healthy {
		t.Fatalf("pod endpoint = %+v; want the pod's labels and service account, the node's locality, ready", pe)
	}
	if ne := byKey["10.244.9.9:9090"]; ne == nil || ne.Healthy || ne.Locality != "eu-b" && ne.Locality != "/eu-b" {
		t.Fatalf("not-ready endpoint = %+v; want unhealthy with the slice's zone", ne)
	}

	// A pod relabel reaches the endpoint (through the slice's pod index)
	// as an endpoint-only change.
	pod, _ := c.Client.CoreV1().Pods(ns).Get(context.Background(), "reviews-0", metav1.GetOptions{})
	pod.Labels["version"] = "v3"
	if _, err := c.Client.CoreV1().Pods(ns).Update(context.Background(), pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, "the pod's new label on its endpoint", func() bool {
		for _, ep := range e.reg.Endpoints().Endpoints(sk) {
			if ep.Address == "10.244.1.5" && ep.Labels["version"] == "v3" {
				return true
			}
		}
		return false
	})

	// A ServiceEntry selecting the pod (cross-selection: SE -> Pod).
	applyYAML(t, c, `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: reviews-ext, namespace: `+ns+`}
spec:
  hosts: [reviews.mesh.example]
  ports: [{number: 80, name: http, protocol: HTTP, targetPort: 8080}]
  resolution: STATIC
  workloadSelector: {labels: {app: reviews}}
`)
	ek := model.ServiceKey{Hostname: "reviews.mesh.example", Namespace: ns}
	poll(t, "the ServiceEntry to select the pod", func() bool {
		eps := e.reg.Endpoints().Endpoints(ek)
		return len(eps) == 1 && eps[0].Address == "10.244.1.5" && eps[0].Port == 8080 && eps[0].ServiceAccount == "bookinfo-reviews"
	})
}
