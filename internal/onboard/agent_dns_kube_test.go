package onboard

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/baremesh/baremesh/core/testkit"
	"github.com/baremesh/baremesh/sources/kube/kubetest"
)

// TestPilotAgentDNSKubernetesNames: with a real kube-apiserver as one of
// baremeshd's clusters, Istio's agent on the VM (namespace bookinfo, as
// its cluster.env says) answers a Kubernetes Service by its full name and
// by the short forms a pod's search domains produce (reviews,
// reviews.bookinfo, reviews.bookinfo.svc) with its cluster IP, and a
// headless Service with its ready pods' IPs (the unready one left out,
// then in once it turns ready: an endpoint-only change).
func TestPilotAgentDNSKubernetesNames(t *testing.T) {
	bins := istioBins(t)
	kc := kubetest.Start(t, true)
	t.Cleanup(kc.Stop) // after the daemon stops (cleanups run last-in first-out)
	ctx := context.Background()
	const ns = "bookinfo"
	_, err := kc.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	must(t, err)
	reviews, err := kc.Client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "reviews", Namespace: ns},
		Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": "reviews"}, Ports: []corev1.ServicePort{{Name: "http", Port: 9080}}},
	}, metav1.CreateOptions{})
	must(t, err)
	_, err = kc.Client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "mysql", Namespace: ns},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: map[string]string{"app": "mysql"},
			Ports: []corev1.ServicePort{{Name: "tcp", Port: 3306}}},
	}, metav1.CreateOptions{})
	must(t, err)
	ready, unready, port, name := true, false, int32(3306), "tcp"
	slice, err := kc.Client.DiscoveryV1().EndpointSlices(ns).Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "mysql-1", Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: "mysql"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"10.244.0.5"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}},
			{Addresses: []string{"10.244.0.6"}, Conditions: discoveryv1.EndpointConditions{Ready: &unready}},
			{Addresses: []string{"10.244.0.7"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}},
		},
		Ports: []discoveryv1.EndpointPort{{Name: &name, Port: &port}},
	}, metav1.CreateOptions{})
	must(t, err)
	clusters := t.TempDir()
	must(t, os.WriteFile(filepath.Join(clusters, "k1.yaml"), kc.Kubeconfig(t, "baremesh", nil), 0o600))

	v := startDNSVM(t, bins, 2, false, "clusters: "+clusters+"\n")
	ip := []string{reviews.Spec.ClusterIP}
	testkit.EventuallyWithin(t, 60*time.Second, "the agent answers reviews.bookinfo.svc.cluster.local with "+ip[0], func() bool {
		return slices.Equal(v.ns.lookup(t, "reviews.bookinfo.svc.cluster.local."), ip)
	})
	for _, q := range []string{"reviews.", "reviews.bookinfo.", "reviews.bookinfo.svc."} {
		if got := v.ns.lookup(t, q); !slices.Equal(got, ip) {
			t.Errorf("%s: %v, want %v", q, got, ip)
		}
	}
	want := []string{"10.244.0.5", "10.244.0.7"}
	for _, q := range []string{"mysql.bookinfo.svc.cluster.local.", "mysql."} {
		if got := v.ns.lookup(t, q); !slices.Equal(got, want) {
			t.Errorf("%s (headless): %v, want %v", q, got, want)
		}
	}

	// The unready pod turns ready: an endpoint change of a headless
	// Service pushes the table, and the agent answers with three IPs.
	slice.Endpoints[1].Conditions.Ready = &ready
	written := time.Now()
	_, err = kc.Client.DiscoveryV1().EndpointSlices(ns).Update(ctx, slice, metav1.UpdateOptions{})
	must(t, err)
	want = []string{"10.244.0.5", "10.244.0.6", "10.244.0.7"}
	testkit.EventuallyWithin(t, 30*time.Second, "the agent answers mysql with the pod that turned ready", func() bool {
		return slices.Equal(v.ns.lookup(t, "mysql.bookinfo.svc.cluster.local."), want)
	})
	t.Logf("EndpointSlice update to the agent's new answer: %v", time.Since(written).Round(time.Millisecond))
	v.agent.stop()
}
