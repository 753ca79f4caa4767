package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/baremesh/baremesh/sources/kube/kubetest"
)

// gatewayAPICRDs returns the standard-channel CRD files of the
// sigs.k8s.io/gateway-api module in the module cache ("" : none).
func gatewayAPICRDs(t *testing.T) []string {
	out, _ := exec.Command("go", "env", "GOMODCACHE").Output()
	dirs, _ := filepath.Glob(filepath.Join(strings.TrimSpace(string(out)), "sigs.k8s.io", "gateway-api@v1.*", "config", "crd", "standard"))
	if len(dirs) == 0 {
		t.Skip("skipping: no sigs.k8s.io/gateway-api module in the module cache (its CRDs)")
	}
	files, _ := filepath.Glob(filepath.Join(dirs[len(dirs)-1], "gateway.networking.k8s.io_*.yaml"))
	var crds []string
	for _, f := range files {
		if !strings.Contains(f, "vap_") {
			crds = append(crds, f)
		}
	}
	return crds
}

// applyYAML creates every document of a manifest file with the dynamic
// client (resources named by lowercase plural kind).
func applyYAML(t *testing.T, kc *kubetest.Cluster, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for {
		var obj map[string]any
		if err := dec.Decode(&obj); err != nil {
			break
		}
		if len(obj) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: obj}
		gvk := u.GroupVersionKind()
		res := strings.ToLower(gvk.Kind) + "s"
		r := kc.Dyn.Resource(schema.GroupVersionResource{Group: gvk.Group, Version: gvk.Version, Resource: res})
		if u.GetNamespace() != "" {
			_, err = r.Namespace(u.GetNamespace()).Create(context.Background(), u, metav1.CreateOptions{})
		} else {
			_, err = r.Create(context.Background(), u, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatalf("%s: %s %s: %v", path, gvk.Kind, u.GetName(), err)
		}
	}
}

// TestGatewayAPIStatusWrittenToKubernetes: Gateway API objects in a real
// kube-apiserver (with the gateway-api module's CRDs) are read by
// baremeshd, whose identity has only the example ClusterRole; the status
// it computes is written to their status subresource and read back with
// client-go: the Gateway programmed with its attached route, the route
// accepted by its parent, a route of a namespace the listener refuses
// not accepted, with the API's reason.
func TestGatewayAPIStatusWrittenToKubernetes(t *testing.T) {
	crds := gatewayAPICRDs(t)
	kc := kubetest.Start(t, true)
	t.Cleanup(kc.Stop)
	for _, f := range crds {
		kc.InstallCRDs(t, f)
	}
	applyYAML(t, kc, "../../examples/mixed-mesh/clusterrole.yaml")
	ctx := context.Background()
	for _, ns := range []string{"edge", "apps"} {
		if _, err := kc.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	manifest := filepath.Join(t.TempDir(), "gw.yaml")
	if err := os.WriteFile(manifest, []byte(statusObjects), 0o644); err != nil {
		t.Fatal(err)
	}
	applyYAML(t, kc, manifest)

	clusters := t.TempDir()
	// The identity the example ClusterRole binds, without system:masters.
	if err := os.WriteFile(filepath.Join(clusters, "k1.yaml"), kc.Kubeconfig(t, "baremesh", []string{}), 0o600); err != nil {
		t.Fatal(err)
	}
	startKubeMesh(t, map[string]string{"echo.yaml": statusEcho}, clusters)

	checkStatusObjects(t, func(kind, ns, name string) map[string]any {
		res := map[string]string{"Gateway": "gateways", "HTTPRoute": "httproutes"}[kind]
		u, err := kc.Dyn.Resource(schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: res}).
			Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil
		}
		st, _, _ := unstructured.NestedMap(u.Object, "status")
		return st
	})
}
