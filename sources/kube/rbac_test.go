package kube_test

import (
	"context"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/baremesh/baremesh/core/config"
)

// TestKindNotGrantedIsLeftOut: a cluster that serves an Istio kind whose
// list baremeshd's ClusterRole does not grant (new CRDs, the previous
// release's role) still syncs, with every granted kind; the kind left out
// is a problem naming what to grant, and once the role grants it the kind
// is followed at the next poll and the problem goes. Before, the kind's
// informer never synced and neither did the cluster.
func TestKindNotGrantedIsLeftOut(t *testing.T) {
	c := cluster(t, "a", true)
	ctx := context.Background()
	ensureNamespace(t, c, "rbac", nil)
	applyYAML(t, c, `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: reviews, namespace: rbac}
spec: {host: reviews.rbac.svc.cluster.local}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews, namespace: rbac}
spec:
  hosts: [reviews.rbac.svc.cluster.local]
  http: [{route: [{destination: {host: reviews.rbac.svc.cluster.local}}]}]
`)
	read := []string{"get", "list", "watch"}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "rbac-test"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"services", "pods", "nodes", "namespaces"}, Verbs: read},
		{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: read},
		// Every Istio kind but VirtualServices.
		{APIGroups: []string{"networking.istio.io"}, Resources: []string{"serviceentries", "destinationrules", "gateways", "sidecars", "workloadentries", "workloadgroups", "envoyfilters", "proxyconfigs"}, Verbs: read},
		{APIGroups: []string{"security.istio.io", "telemetry.istio.io", "extensions.istio.io"}, Resources: []string{"*"}, Verbs: read},
	}}
	role, err := c.Client.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "rbac-test"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "rbac-test"},
		Subjects: []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: "rbac-user"}}}
	if _, err := c.Client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Client.RbacV1().ClusterRoleBindings().Delete(ctx, "rbac-test", metav1.DeleteOptions{})
		_ = c.Client.RbacV1().ClusterRoles().Delete(ctx, "rbac-test", metav1.DeleteOptions{})
	})
	dir := t.TempDir()
	writeKubeconfig(t, dir, "rbac", c.Kubeconfig(t, "rbac-user", []string{"rbac-group"}))
	e := startEnv(t, dir, fastOptions())

	// startEnv waited for the source, which gives up on a cluster after
	// SyncTimeout: the cluster itself must say it synced.
	poll(t, "the cluster synced with one kind not granted", func() bool {
		st := e.src.Status()
		return len(st) == 1 && st[0].Synced
	})
	poll(t, "the granted DestinationRule", func() bool {
		_, ok := e.agg.Get(config.DestinationRule, "rbac", "reviews")
		return ok
	})
	problem := func() string {
		for _, p := range e.agg.Problems() {
			if strings.Contains(p.Error, "virtualservices.networking.istio.io") {
				return p.Error
			}
		}
		return ""
	}
	poll(t, "a problem naming virtualservices", func() bool { return problem() != "" })
	if p := problem(); !strings.Contains(p, "grant get, list and watch") || !strings.Contains(p, "ClusterRole") {
		t.Fatalf("problem = %q, want it to say what to grant", p)
	}
	if _, ok := e.agg.Get(config.VirtualService, "rbac", "reviews"); ok {
		t.Fatal("a VirtualService was read without the right to list them")
	}

	role.Rules[2].Resources = append(role.Rules[2].Resources, "virtualservices")
	if _, err := c.Client.RbacV1().ClusterRoles().Update(ctx, role, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, "the VirtualService once granted", func() bool {
		_, ok := e.agg.Get(config.VirtualService, "rbac", "reviews")
		return ok && problem() == ""
	})
}
