// Package istiodtest starts Istio's istiod (pilot-discovery, built by
// shared/tools/istio-bins) over a test kube-apiserver and etcd
// (shared/tools/kube-assets, through envtest) holding Istio's CRDs, for
// tests and benchmarks that compare baremesh with istiod or use istiod as
// a peer. Config reaches istiod as custom resources written with Apply.
//
// It is a normal package so that tests of several packages share it, but
// only tests import it: it starts processes and fails or skips the test
// it is given. It imports nothing of ours but sources/kube/kubetest (the
// API server's start timeout).
package istiodtest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/baremesh/baremesh/sources/kube/kubetest"
)

// Options configure Start. The zero value is istiod with Istio's default
// mesh config.
type Options struct {
	// MeshConfig is istiod's mesh config (YAML); default "{}".
	MeshConfig string
	// Env is added to istiod's environment.
	Env []string
	// GatewayAPI installs the Gateway API's standard-channel CRDs too, so
	// istiod's gateway controller runs.
	GatewayAPI bool
	// ReadyTimeout bounds the wait for istiod's /ready (default 90 s).
	ReadyTimeout time.Duration
	// LogCopy, if set, is where istiod's log is copied when the test
	// ends.
	LogCopy string
}

// Istiod is a running istiod and its API server. Its clients are safe for
// concurrent use.
type Istiod struct {
	// XDSAddr is istiod's plaintext gRPC (xDS) address (its --grpcAddr,
	// 15010 in a cluster); DebugAddr serves /ready, /debug/* (its
	// --httpAddr, 8080); MonitoringAddr serves /metrics (15014).
	XDSAddr, DebugAddr, MonitoringAddr string
	// PID is pilot-discovery's process ID (for /proc/PID/stat and status).
	PID int
	// Dir holds its kubeconfig, mesh config and log (istiod.log).
	Dir string
	// Rest, Kube and Dynamic reach the API server as cluster admin.
	Rest    *rest.Config
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface

	cmd *exec.Cmd
}

// Binaries returns pilot-discovery, the kube-assets folder and Istio's
// CRD file, and a non-empty missing naming what was not found.
func Binaries() (bin, assets, crds, missing string) {
	home, _ := os.UserHomeDir()
	bin = findOne(filepath.Join(home, ".cache", "istio-bins", "*", "pilot-discovery"))
	assets = os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		if a := findOne(filepath.Join(home, ".cache", "kube-assets", "*", "kube-apiserver")); a != "" {
			assets = filepath.Dir(a)
		}
	}
	crds = findOne(filepath.Join(gomodcache(), "istio.io", "istio@*", "manifests", "charts", "base", "files", "crd-all.gen.yaml"))
	var miss []string
	if bin == "" {
		miss = append(miss, "pilot-discovery (shared/tools/istio-bins)")
	}
	if assets == "" {
		miss = append(miss, "kube-apiserver and etcd (shared/tools/kube-assets)")
	}
	if crds == "" {
		miss = append(miss, "the istio.io/istio module's CRDs (go mod download)")
	}
	return bin, assets, crds, strings.Join(miss, ", ")
}

func gomodcache() string {
	if g := os.Getenv("GOMODCACHE"); g != "" {
		return g
	}
	out, _ := exec.Command("go", "env", "GOMODCACHE").Output()
	return strings.TrimSpace(string(out))
}

func findOne(pattern string) string {
	m, _ := filepath.Glob(pattern)
	if len(m) == 0 {
		return ""
	}
	return m[len(m)-1]
}

// FreeAddr returns a loopback address no one listens on now.
func FreeAddr(tb testing.TB) string {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// Start starts kube-apiserver and istiod and waits until istiod is
// ready, or skips tb naming what is missing. Every process is stopped
// when tb ends, failed or not.
func Start(tb testing.TB, opts Options) *Istiod {
	tb.Helper()
	bin, assets, crds, missing := Binaries()
	if missing != "" {
		tb.Skipf("skipping: istiod needs %s", missing)
	}
	if opts.MeshConfig == "" {
		opts.MeshConfig = "{}\n"
	}
	if opts.ReadyTimeout == 0 {
		opts.ReadyTimeout = 90 * time.Second
	}
	// envtest logs through controller-runtime's logger, which otherwise
	// prints a stack trace saying it was never set.
	ctrllog.SetLogger(logr.Discard())
	crdPaths := []string{crds}
	if opts.GatewayAPI {
		// The standard channel (TCPRoute and TLSRoute are there from
		// v1.5), without the ValidatingAdmissionPolicies.
		if gw := findOne(filepath.Join(gomodcache(), "sigs.k8s.io", "gateway-api@v1.*", "config", "crd", "standard")); gw != "" {
			files, _ := filepath.Glob(filepath.Join(gw, "gateway.networking.k8s.io_*.yaml"))
			for _, f := range files {
				if !strings.Contains(f, "vap_") {
					crdPaths = append(crdPaths, f)
				}
			}
		}
	}
	api := &envtest.Environment{BinaryAssetsDirectory: assets, CRDInstallOptions: envtest.CRDInstallOptions{Paths: crdPaths},
		ControlPlaneStartTimeout: kubetest.StartTimeout}
	cfg, err := api.Start()
	if err != nil {
		tb.Fatalf("kube-apiserver: %v", err)
	}
	tb.Cleanup(func() { _ = api.Stop() })
	user, err := api.AddUser(envtest.User{Name: "istiod", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		tb.Fatalf("kube-apiserver: add istiod's user: %v", err)
	}
	kc, err := user.KubeConfig()
	if err != nil {
		tb.Fatalf("kube-apiserver: istiod's kubeconfig: %v", err)
	}
	i := &Istiod{Dir: tb.TempDir(), XDSAddr: FreeAddr(tb), DebugAddr: FreeAddr(tb), MonitoringAddr: FreeAddr(tb), Rest: cfg}
	i.Kube = kubernetes.NewForConfigOrDie(cfg)
	i.Dynamic = dynamic.NewForConfigOrDie(cfg)
	write := func(name, body string, mode os.FileMode) {
		if err := os.WriteFile(filepath.Join(i.Dir, name), []byte(body), mode); err != nil {
			tb.Fatal(err)
		}
	}
	write("kubeconfig", string(kc), 0o600)
	write("mesh.yaml", opts.MeshConfig, 0o644)
	write("meshNetworks.yaml", "networks: {}\n", 0o644) // watched: NetworksPath
	if err := i.Namespace(context.Background(), "istio-system"); err != nil {
		tb.Fatal(err)
	}
	logf, err := os.Create(i.LogPath())
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(bin, "discovery", "--kubeconfig", filepath.Join(i.Dir, "kubeconfig"),
		"--grpcAddr", i.XDSAddr, "--httpAddr", i.DebugAddr, "--monitoringAddr", i.MonitoringAddr,
		"--secureGRPCAddr=", "--httpsAddr=", "--meshConfig", filepath.Join(i.Dir, "mesh.yaml"),
		"--networksConfig", i.NetworksPath())
	cmd.Env = append(append(os.Environ(), "POD_NAMESPACE=istio-system"), opts.Env...)
	cmd.Stdout, cmd.Stderr, cmd.Dir = logf, logf, i.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start %s: %v", bin, err)
	}
	i.cmd, i.PID = cmd, cmd.Process.Pid
	tb.Cleanup(func() {
		i.Stop()
		logf.Close()
		if opts.LogCopy != "" {
			b, _ := os.ReadFile(logf.Name())
			_ = os.WriteFile(opts.LogCopy, b, 0o644)
		}
	})
	deadline := time.Now().Add(opts.ReadyTimeout)
	for {
		resp, err := http.Get("http://" + i.DebugAddr + "/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return i
			}
		}
		if time.Now().After(deadline) {
			tb.Fatalf("istiod not ready within %v; log tail:\n%s", opts.ReadyTimeout, i.LogTail(3000))
		}
		time.Sleep(100 * time.Millisecond) // polling istiod's readiness, not synchronisation
	}
}

// Stop kills istiod (its whole process group) and waits for it; the API
// server stays until the test ends. Stop is idempotent.
func (i *Istiod) Stop() {
	if i.cmd == nil {
		return
	}
	_ = syscall.Kill(-i.cmd.Process.Pid, syscall.SIGKILL)
	_ = i.cmd.Wait()
	i.cmd = nil
}

// NetworksPath is istiod's meshNetworks file (watched; none at first).
func (i *Istiod) NetworksPath() string { return filepath.Join(i.Dir, "meshNetworks.yaml") }

// LogPath is istiod's log file.
func (i *Istiod) LogPath() string { return filepath.Join(i.Dir, "istiod.log") }

// LogTail is the last n bytes of istiod's log.
func (i *Istiod) LogTail(n int) string {
	b, _ := os.ReadFile(i.LogPath())
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// Namespace creates namespace ns unless it exists.
func (i *Istiod) Namespace(ctx context.Context, ns string) error {
	_, err := i.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("namespace %s: %w", ns, err)
	}
	return nil
}

// GVR is the resource of an object of one of Istio's or the Gateway
// API's kinds (its plural, lower case).
func GVR(obj map[string]any) schema.GroupVersionResource {
	u := unstructured.Unstructured{Object: obj}
	gvk := u.GroupVersionKind()
	plural := strings.ToLower(gvk.Kind) + "s"
	if strings.HasSuffix(plural, "ys") && !strings.HasSuffix(plural, "ays") { // policies, not gateways
		plural = strings.TrimSuffix(plural, "ys") + "ies"
	}
	if strings.HasSuffix(plural, "sss") { // gatewayclasses
		plural = strings.TrimSuffix(plural, "s") + "es"
	}
	return schema.GroupVersionResource{Group: gvk.Group, Version: gvk.Version, Resource: plural}
}

// Apply creates obj (an unstructured Kubernetes object) or, if it
// exists, replaces it, and returns its new resource version.
func (i *Istiod) Apply(ctx context.Context, obj map[string]any) (string, error) {
	u := &unstructured.Unstructured{Object: obj}
	rc := i.Dynamic.Resource(GVR(obj)).Namespace(u.GetNamespace())
	key := fmt.Sprintf("%s %s/%s", u.GetKind(), u.GetNamespace(), u.GetName())
	out, err := rc.Create(ctx, u.DeepCopy(), metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		// istiod writes status too: a conflict is retried on the newer
		// version.
		err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur, err := rc.Get(ctx, u.GetName(), metav1.GetOptions{})
			if err != nil {
				return err
			}
			up := u.DeepCopy()
			up.SetResourceVersion(cur.GetResourceVersion())
			out, err = rc.Update(ctx, up, metav1.UpdateOptions{})
			return err
		})
	}
	if err != nil {
		return "", fmt.Errorf("apply %s: %w", key, err)
	}
	return out.GetResourceVersion(), nil
}
