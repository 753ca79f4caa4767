// Package kubetest gives tests of the node agent one real kube-apiserver
// and etcd per test binary (controller-runtime's envtest over the
// binaries shared/tools/kube-assets builds; hack/deps.d/40-cni.sh runs
// it), started on first use. Call Stop from TestMain.
//
// It imports nothing of baremesh.
package kubetest

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

var (
	once sync.Once
	env  *envtest.Environment
	cfg  *rest.Config
	err  error
)

// assets finds the binaries: KUBEBUILDER_ASSETS, else kube-assets' cache.
func assets() string {
	if d := os.Getenv("KUBEBUILDER_ASSETS"); d != "" {
		return d
	}
	home, _ := os.UserHomeDir()
	matches, _ := filepath.Glob(filepath.Join(home, ".cache", "kube-assets", "*", "kube-apiserver"))
	if len(matches) == 0 {
		return ""
	}
	return filepath.Dir(matches[len(matches)-1])
}

// Config returns a client config for the shared API server, skipping the
// test when the binaries are not built.
func Config(t testing.TB) *rest.Config {
	t.Helper()
	dir := assets()
	if dir == "" {
		t.Skip("skipping: no kube-apiserver/etcd; run hack/deps.d/40-cni.sh (shared/tools/kube-assets) or set KUBEBUILDER_ASSETS")
	}
	once.Do(func() {
		env = &envtest.Environment{BinaryAssetsDirectory: dir}
		cfg, err = env.Start()
	})
	if err != nil {
		t.Fatalf("starting kube-apiserver from %s: %v", dir, err)
	}
	return cfg
}

// Clientset returns a clientset for the shared API server.
func Clientset(t testing.TB) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(Config(t))
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// Stop stops the API server if one was started.
func Stop() {
	if env != nil && err == nil {
		_ = env.Stop()
	}
}
