package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// TestKubernetesExample: examples/kubernetes/baremesh-cni.yaml decodes
// strictly into the API types, its ClusterRole grants what the plugin and
// the repair controller call, and every container's arguments are flags
// the real subcommands accept.
func TestKubernetesExample(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "examples", "kubernetes", "baremesh-cni.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var ds *appsv1.DaemonSet
	var role *rbacv1.ClusterRole
	var binding *rbacv1.ClusterRoleBinding
	var sa *corev1.ServiceAccount
	for i, doc := range bytes.Split(data, []byte("\n---\n")) {
		var meta struct{ Kind string }
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			t.Fatalf("document %d: %v", i, err)
		}
		var obj any
		switch meta.Kind {
		case "Namespace":
			obj = &corev1.Namespace{}
		case "ServiceAccount":
			sa = &corev1.ServiceAccount{}
			obj = sa
		case "ClusterRole":
			role = &rbacv1.ClusterRole{}
			obj = role
		case "ClusterRoleBinding":
			binding = &rbacv1.ClusterRoleBinding{}
			obj = binding
		case "DaemonSet":
			ds = &appsv1.DaemonSet{}
			obj = ds
		default:
			t.Fatalf("document %d: unexpected kind %q", i, meta.Kind)
		}
		if err := yaml.UnmarshalStrict(doc, obj); err != nil {
			t.Fatalf("document %d (%s): %v", i, meta.Kind, err)
		}
	}
	if ds == nil || role == nil || binding == nil || sa == nil {
		t.Fatal("the example lacks the DaemonSet, ClusterRole, ClusterRoleBinding or ServiceAccount")
	}
	grants := func(resource, verb string) bool {
		for _, r := range role.Rules {
			if slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb) {
				return true
			}
		}
		return false
	}
	for _, need := range [][2]string{{"pods", "get"}, {"pods", "list"}, {"pods", "watch"}, {"pods", "patch"}, {"pods", "delete"},
		{"namespaces", "get"}, {"namespaces", "list"}, {"namespaces", "watch"}} {
		if !grants(need[0], need[1]) {
			t.Errorf("ClusterRole does not grant %s %s", need[1], need[0])
		}
	}
	if binding.RoleRef.Name != role.Name || binding.Subjects[0].Name != sa.Name || ds.Spec.Template.Spec.ServiceAccountName != sa.Name {
		t.Error("binding, service account and DaemonSet do not refer to each other")
	}
	if !ds.Spec.Template.Spec.HostNetwork {
		t.Error("the DaemonSet must use the host network (it serves the node)")
	}
	for _, c := range ds.Spec.Template.Spec.Containers {
		args := append(slices.Clone(c.Args), "-h")
		code, _, stderr := runMain(t, args...)
		if code != 2 || strings.Contains(stderr, "not defined") || !strings.Contains(stderr, "Usage") {
			t.Errorf("container %s: %v: exit %d, %s", c.Name, c.Args, code, stderr)
		}
	}
}
