package daemon

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/baremesh/baremesh/core/testkit"
	"github.com/baremesh/baremesh/internal/daemonconfig"
	"github.com/baremesh/baremesh/sources/kube/kubetest"
)

// TestKubeStartsWithTheLastGoodMesh (issue #31 item 1): the Kubernetes
// source takes its discoverySelectors from the mesh config in force, not
// from a new read of the file: a bad edit made after the daemon loaded
// the mesh config and before the clusters start must not widen the
// selection to every namespace (Istio's defaults). Real kube-apiserver.
func TestKubeStartsWithTheLastGoodMesh(t *testing.T) {
	kc := kubetest.Start(t, false)
	t.Cleanup(kc.Stop)
	ctx := t.Context()
	for ns, labels := range map[string]map[string]string{"prod": {"env": "prod"}, "dev": {"env": "dev"}} {
		if _, err := kc.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}
		if _, err := kc.Client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	root := t.TempDir()
	conf, clusters := filepath.Join(root, "conf.d"), filepath.Join(root, "clusters.d")
	for _, d := range []string{conf, clusters} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(clusters, "main.yaml"), kc.Kubeconfig(t, "meshtest", nil), 0o600); err != nil {
		t.Fatal(err)
	}
	mesh := filepath.Join(root, "meshconfig.yaml")
	if err := os.WriteFile(mesh, []byte("discoverySelectors: [{matchLabels: {env: prod}}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := daemonconfig.Defaults()
	cfg.ConfigDirs, cfg.Clusters, cfg.MeshConfig = []string{conf}, clusters, mesh
	cfg.XDSAddr, cfg.HTTPAddr = "127.0.0.1:0", "127.0.0.1:0"
	d, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	// The bad edit, between the load and the start of the clusters.
	if err := os.WriteFile(mesh, []byte("discoverySelectors: not-a-list\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(runCtx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("daemon did not stop within 10s of cancel")
		}
	})
	has := func(host string) bool {
		pc := d.Pipeline().Current()
		return pc != nil && len(pc.ServicesByHost(host)) > 0
	}
	testkit.EventuallyWithin(t, 60*time.Second, "the selected namespace's service", func() bool {
		return has("web.prod.svc.cluster.local")
	})
	// A service made now arrives after everything listed at the start.
	later := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "later", Namespace: "prod"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}
	if _, err := kc.Client.CoreV1().Services("prod").Create(ctx, later, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.EventuallyWithin(t, 30*time.Second, "a service made after the start", func() bool {
		return has("later.prod.svc.cluster.local")
	})
	if has("web.dev.svc.cluster.local") {
		t.Fatal("web.dev is served: the bad mesh edit replaced the discoverySelectors in force with Istio's defaults")
	}
}
