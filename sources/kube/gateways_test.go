package kube_test

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/baremesh/baremesh/core/model"
)

// TestNetworkGatewayServices: a Service labelled
// topology.istio.io/network (Istio's east-west gateway) is that network's
// gateway at its load balancer's IPs and hostnames and its external IPs,
// on its gateway
// port (networking.istio.io/gatewayPort, else 15443, which the Service
// must have); the registry's gateways follow its status and its removal,
// each change a gateway change; every Service's external IPs are kept by
// hostname (a meshNetworks registryServiceName). Against a real API
// server.
func TestNetworkGatewayServices(t *testing.T) {
	c := cluster(t, "a", true)
	ns := "istio-gw"
	ensureNamespace(t, c, ns, map[string]string{"mesh": "on"})
	dir := t.TempDir()
	writeKubeconfig(t, dir, "east", c.Kubeconfig(t, "gw", nil))
	e := startEnv(t, dir, fastOptions())
	ctx := context.Background()
	svcs := c.Client.CoreV1().Services(ns)
	gw, err := svcs.Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "istio-eastwestgateway", Namespace: ns, Labels: map[string]string{"topology.istio.io/network": "net-k8s"}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ExternalIPs: []string{"192.0.2.30"},
			Ports: []corev1.ServicePort{{Name: "tls", Port: 15443}, {Name: "status-port", Port: 15021}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Ports the gateway does not listen on make no gateway.
	if _, err := svcs.Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "not-a-gateway", Namespace: ns, Labels: map[string]string{"topology.istio.io/network": "net-x"}},
		Spec:       corev1.ServiceSpec{ExternalIPs: []string{"192.0.2.99"}, Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := func(gws ...model.NetworkGateway) func() bool {
		return func() bool { return slices.Equal(e.reg.KubeGateways(), gws) }
	}
	poll(t, "the external IP's gateway", want(model.NetworkGateway{Network: "net-k8s", Addr: "192.0.2.30", Port: 15443}))
	// Any Service's external IPs are there for a meshNetworks gateway's
	// registryServiceName.
	poll(t, "a Service's external IPs by hostname", func() bool {
		return slices.Equal(e.reg.KubeExternalIPs("not-a-gateway."+ns+".svc.cluster.local"), []string{"192.0.2.99"})
	})

	gw.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.31"}, {Hostname: "gw.example.com"}}
	if _, err := svcs.UpdateStatus(ctx, gw, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, "the load balancer's IP and hostname beside it (the daemon resolves the name)", want(
		model.NetworkGateway{Network: "net-k8s", Addr: "192.0.2.30", Port: 15443}, model.NetworkGateway{Network: "net-k8s", Addr: "192.0.2.31", Port: 15443},
		model.NetworkGateway{Network: "net-k8s", Addr: "gw.example.com", Port: 15443}))

	if err := svcs.Delete(ctx, "istio-eastwestgateway", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, "no gateway once the Service is gone", want())
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, ch := range e.changes {
		if ch.Gateways {
			n++
		}
	}
	if n < 3 {
		t.Errorf("%d gateway changes, want one each for created, load balancer and deleted (and the other Service's external IP)", n)
	}
}
