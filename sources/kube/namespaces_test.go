package kube_test

import (
	"context"
	"testing"

	meshv1alpha1 "istio.io/api/mesh/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/baremesh/baremesh/core/config"
)

// TestDiscoverySelectors: only namespaces the mesh config's
// discoverySelectors match are seen (Services, their endpoints and Istio
// resources); relabelling a namespace and changing the selectors take
// effect live.
func TestDiscoverySelectors(t *testing.T) {
	c := cluster(t, "a", true)
	ensureNamespace(t, c, "sel-b", nil) // unlabelled; kubeObjects keeps it so
	kubeObjects(t, c, "sel-a", "10.244.3.1")
	kubeObjects(t, c, "sel-b", "10.244.3.2")
	applyYAML(t, c, `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: reviews, namespace: sel-b}
spec: {host: reviews.sel-b.svc.cluster.local}
`)
	dir := t.TempDir()
	writeKubeconfig(t, dir, "sel", c.Kubeconfig(t, "sel", nil))
	opts := fastOptions()
	opts.DiscoverySelectors = []*meshv1alpha1.LabelSelector{{MatchLabels: map[string]string{"mesh": "on"}}}
	e := startEnv(t, dir, opts)
	a, b := "reviews.sel-a.svc.cluster.local", "reviews.sel-b.svc.cluster.local"
	poll(t, "sel-a's Service", func() bool { return hasService(e, a) })
	if hasService(e, b) {
		t.Fatal("a Service of an unselected namespace is in the model")
	}
	if _, ok := e.agg.Get(config.DestinationRule, "sel-b", "reviews"); ok {
		t.Fatal("an Istio resource of an unselected namespace is in the store")
	}

	relabel := func(ns string, labels map[string]string) {
		t.Helper()
		n, err := c.Client.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Labels = labels
		if _, err := c.Client.CoreV1().Namespaces().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	relabel("sel-b", map[string]string{"mesh": "on"})
	poll(t, "sel-b selected after its label", func() bool {
		_, ok := e.agg.Get(config.DestinationRule, "sel-b", "reviews")
		return ok && hasService(e, b) && len(e.reg.Endpoints().Endpoints(serviceKey(b, "sel-b"))) == 4
	})
	relabel("sel-a", nil)
	poll(t, "sel-a dropped after losing its label", func() bool { return !hasService(e, a) })

	// The mesh config's selectors change: no selectors, every namespace.
	if err := e.src.SetDiscoverySelectors(nil); err != nil {
		t.Fatal(err)
	}
	poll(t, "every namespace without selectors", func() bool { return hasService(e, a) && hasService(e, b) })
}
