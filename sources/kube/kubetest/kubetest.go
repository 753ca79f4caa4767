// Package kubetest starts real kube-apiservers with etcd for the tests of
// the Kubernetes source (controller-runtime's envtest over the binaries
// shared/tools/kube-assets builds), with Istio's CRDs from the istio.io/api
// module installed, and writes kubeconfig files for them. An API server
// can be restarted over the same etcd, certificates and port, as a real
// control plane upgrade or crash does.
//
// It imports nothing of baremesh.
package kubetest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Cluster is one running API server.
type Cluster struct {
	env    *envtest.Environment
	Config *rest.Config
	Client kubernetes.Interface
	Dyn    dynamic.Interface
	mu     sync.Mutex
}

// StartTimeout is how long a test waits for kube-apiserver to come up
// (envtest's default is 20 s).
const StartTimeout = 2 * time.Minute

// Assets finds the binaries: KUBEBUILDER_ASSETS, else kube-assets' cache;
// "" when they are not built.
func Assets() string {
	if d := os.Getenv("KUBEBUILDER_ASSETS"); d != "" {
		return d
	}
	home, _ := os.UserHomeDir()
	for _, bin := range []string{"kube-apiserver", "etcd"} {
		if m, _ := filepath.Glob(filepath.Join(home, ".cache", "kube-assets", "*", bin)); len(m) == 0 {
			return ""
		}
	}
	m, _ := filepath.Glob(filepath.Join(home, ".cache", "kube-assets", "*", "etcd"))
	return filepath.Dir(m[len(m)-1])
}

// IstioCRDs returns the path of the CRD manifest istio.io/api ships.
func IstioCRDs() (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "istio.io/api").Output()
	if err != nil {
		return "", err
	}
	return filepath.Join(strings.TrimSpace(string(out)), "kubernetes", "customresourcedefinitions.gen.yaml"), nil
}

// Start starts an API server; with istio, Istio's CRDs are installed. It
// skips the test when the binaries are not built. Stop it when done.
func Start(t testing.TB, istio bool) *Cluster {
	t.Helper()
	if Assets() == "" {
		t.Skip("skipping: no kube-apiserver/etcd; run ../shared/tools/kube-assets (hack/test-deps.sh) or set KUBEBUILDER_ASSETS")
	}
	c, err := StartCluster(istio)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// StartCluster is Start for programs (examples/mixed-mesh).
func StartCluster(istio bool) (*Cluster, error) {
	dir := Assets()
	if dir == "" {
		return nil, errors.New("no kube-apiserver/etcd: run shared/tools/kube-assets or set KUBEBUILDER_ASSETS")
	}
	certDir, err := os.MkdirTemp("", "kubetest-certs-")
	if err != nil {
		return nil, err
	}
	env := &envtest.Environment{BinaryAssetsDirectory: dir}
	// A fixed certificate directory keeps the serving certificates, so a
	// restarted API server is the same server to its clients.
	env.ControlPlane.APIServer = &envtest.APIServer{CertDir: certDir}
	// Room for thousands of Services (envtest's default is a /24).
	env.ControlPlane.APIServer.Configure().Set("service-cluster-ip-range", "10.96.0.0/16")
	// kube-apiserver drains for longer than tests want to wait; after
	// this it is killed, as a crashed one would be.
	env.ControlPlaneStopTimeout = 5 * time.Second
	// envtest waits 20 s for kube-apiserver to come up; on a busy 2-core
	// machine several starting at once took longer (a make test run at a
	// load average of 30 failed after five tries).
	env.ControlPlaneStartTimeout = StartTimeout
	if istio {
		crds, err := IstioCRDs()
		if err != nil {
			return nil, fmt.Errorf("finding istio.io/api's CRDs: %w", err)
		}
		env.CRDInstallOptions = envtest.CRDInstallOptions{Paths: []string{crds}}
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("starting kube-apiserver from %s: %w", dir, err)
	}
	c := &Cluster{env: env, Config: cfg}
	c.Client = kubernetes.NewForConfigOrDie(cfg)
	c.Dyn = dynamic.NewForConfigOrDie(cfg)
	return c, nil
}

// InstallCRDs installs the CRDs of a manifest file (for CRDs that appear
// after the source started).
func (c *Cluster) InstallCRDs(t testing.TB, path string) {
	t.Helper()
	if _, err := envtest.InstallCRDs(c.Config, envtest.CRDInstallOptions{Paths: []string{path}}); err != nil {
		t.Fatalf("installing CRDs from %s: %v", path, err)
	}
}

// Kubeconfig returns a kubeconfig for a user in groups (nil: an admin, in
// system:masters).
func (c *Cluster) Kubeconfig(t testing.TB, user string, groups []string) []byte {
	t.Helper()
	b, err := c.KubeconfigFor(user, groups)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// KubeconfigFor is Kubeconfig for programs.
func (c *Cluster) KubeconfigFor(user string, groups []string) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if groups == nil {
		groups = []string{"system:masters"}
	}
	u, err := c.env.AddUser(envtest.User{Name: user, Groups: groups}, nil)
	if err != nil {
		return nil, err
	}
	return u.KubeConfig()
}

// StopAPIServer stops the API server (SIGTERM, SIGKILL after 5 s);
// etcd and the data stay.
func (c *Cluster) StopAPIServer(t testing.TB) {
	t.Helper()
	if err := c.env.ControlPlane.APIServer.Stop(); err != nil && !strings.Contains(err.Error(), "timeout waiting") {
		t.Fatalf("stopping kube-apiserver: %v", err)
	}
	addr := c.env.ControlPlane.APIServer.SecureServing.Address + ":" + c.env.ControlPlane.APIServer.SecureServing.Port
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err != nil {
			return // the port is free
		}
		conn.Close()
		if time.Now().After(deadline) {
			t.Fatalf("kube-apiserver still listening on %s", addr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// StartAPIServer starts the stopped API server again, on the same port
// with the same certificates.
func (c *Cluster) StartAPIServer(t testing.TB) {
	t.Helper()
	if err := c.env.ControlPlane.APIServer.Start(); err != nil {
		t.Fatalf("restarting kube-apiserver: %v", err)
	}
}

// Stop stops the API server and etcd.
func (c *Cluster) Stop() {
	_ = c.env.Stop()
	_ = os.RemoveAll(c.env.ControlPlane.APIServer.CertDir)
}
