package e2e

import (
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/baremesh/baremesh/core/testkit"
	"github.com/baremesh/baremesh/internal/daemonconfig"
	"github.com/baremesh/baremesh/sources/kube/kubetest"
	"github.com/baremesh/baremesh/sources/mcp"
)

// istiod is a real pilot-discovery (shared/tools/istio-bins) over a real
// kube-apiserver (shared/tools/kube-assets, through envtest) with Istio's
// CRDs: the MCP upstream istiod itself is.
type istiod struct {
	t        *testing.T
	bin, dir string
	args     []string
	env      []string
	grpcAddr string
	httpAddr string
	cmd      *exec.Cmd
	dyn      dynamic.Interface
}

func findOne(pattern string) string {
	m, _ := filepath.Glob(pattern)
	if len(m) == 0 {
		return ""
	}
	return m[len(m)-1]
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startIstiod starts kube-apiserver and istiod; env adds to istiod's
// environment.
func startIstiod(t *testing.T, env ...string) *istiod { return startIstiodMesh(t, "{}\n", env...) }

// startIstiodMesh is startIstiod with a mesh config.
func startIstiodMesh(t *testing.T, meshConfig string, env ...string) *istiod {
	t.Helper()
	home, _ := os.UserHomeDir()
	bin := findOne(filepath.Join(home, ".cache", "istio-bins", "*", "pilot-discovery"))
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		assets = filepath.Dir(findOne(filepath.Join(home, ".cache", "kube-assets", "*", "kube-apiserver")))
	}
	gomod := os.Getenv("GOMODCACHE")
	if gomod == "" {
		out, _ := exec.Command("go", "env", "GOMODCACHE").Output()
		gomod = strings.TrimSpace(string(out))
	}
	crds := findOne(filepath.Join(gomod, "istio.io", "istio@*", "manifests", "charts", "base", "files", "crd-all.gen.yaml"))
	if bin == "" || assets == "." || crds == "" {
		t.Skipf("skipping: needs pilot-discovery (shared/tools/istio-bins), kube-apiserver (shared/tools/kube-assets) and the istio.io/istio module's CRDs; found %q %q %q", bin, assets, crds)
	}
	api := &envtest.Environment{BinaryAssetsDirectory: assets, CRDInstallOptions: envtest.CRDInstallOptions{Paths: []string{crds}},
		ControlPlaneStartTimeout: kubetest.StartTimeout}
	cfg, err := api.Start()
	if err != nil {
		t.Fatalf("kube-apiserver: %v", err)
	}
	t.Cleanup(func() { _ = api.Stop() })
	user, err := api.AddUser(envtest.User{Name: "istiod", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "kubeconfig"), kc, 0o600))
	must(t, os.WriteFile(filepath.Join(dir, "mesh.yaml"), []byte(meshConfig), 0o644))
	cs := kubernetes.NewForConfigOrDie(cfg)
	_, err = cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "istio-system"}}, metav1.CreateOptions{})
	must(t, err)
	i := &istiod{t: t, bin: bin, dir: dir, grpcAddr: freeAddr(t), httpAddr: freeAddr(t), dyn: dynamic.NewForConfigOrDie(cfg)}
	i.args = []string{"discovery", "--kubeconfig", filepath.Join(dir, "kubeconfig"), "--grpcAddr", i.grpcAddr, "--httpAddr", i.httpAddr,
		"--monitoringAddr", freeAddr(t), "--secureGRPCAddr=", "--httpsAddr=", "--meshConfig", filepath.Join(dir, "mesh.yaml")}
	i.env = append(append(os.Environ(), "POD_NAMESPACE=istio-system", "ENABLE_XDS_API_GENERATOR_AUTH=false"), env...)
	i.start()
	t.Cleanup(i.stop)
	return i
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func (i *istiod) start() {
	i.t.Helper()
	log, err := os.OpenFile(filepath.Join(i.dir, "istiod.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	must(i.t, err)
	i.cmd = exec.Command(i.bin, i.args...)
	i.cmd.Env, i.cmd.Stdout, i.cmd.Stderr, i.cmd.Dir = i.env, log, log, i.dir
	must(i.t, i.cmd.Start())
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get("http://" + i.httpAddr + "/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(filepath.Join(i.dir, "istiod.log"))
			if p := os.Getenv("E2E_ISTIOD_LOG"); p != "" {
				_ = os.WriteFile(p, b, 0o644)
			}
			i.t.Fatalf("istiod not ready within 60s; log tail:\n%s", tail(string(b), 3000))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (i *istiod) stop() {
	if i.cmd != nil && i.cmd.Process != nil {
		_ = i.cmd.Process.Kill()
		_ = i.cmd.Wait()
		i.cmd = nil
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// apply creates or updates a manifest in the API server.
func (i *istiod) apply(manifest string) {
	i.t.Helper()
	var u unstructured.Unstructured
	must(i.t, yaml.Unmarshal([]byte(manifest), &u.Object))
	gvk := u.GroupVersionKind()
	plural := strings.ToLower(gvk.Kind) + "s"
	if strings.HasSuffix(plural, "ys") {
		plural = strings.TrimSuffix(plural, "ys") + "ies"
	}
	gvr := schema.GroupVersionResource{Group: gvk.Group, Version: gvk.Version, Resource: plural}
	rc := i.dyn.Resource(gvr).Namespace(u.GetNamespace())
	ctx := context.Background()
	cur, err := rc.Get(ctx, u.GetName(), metav1.GetOptions{})
	if err != nil {
		_, err = rc.Create(ctx, &u, metav1.CreateOptions{})
		must(i.t, err)
		return
	}
	u.SetResourceVersion(cur.GetResourceVersion())
	_, err = rc.Update(ctx, &u, metav1.UpdateOptions{})
	must(i.t, err)
}

// startMeshMCP is startMesh with MCP upstreams.
func startMeshMCP(t *testing.T, files map[string]string, ups ...mcp.UpstreamConfig) *mesh {
	t.Helper()
	return startMeshWith(t, files, func(c *daemonconfig.Config) {
		c.MCP = ups
		must(t, c.Validate())
	})
}

type configzView struct {
	Resources []struct {
		Kind, Namespace, Name string
		Source                struct{ Name string }
	} `json:"resources"`
	MCP []mcp.Status `json:"mcp"`
}

func (m *mesh) configz(t *testing.T) configzView {
	var v configzView
	getJSON(t, "http://"+m.d.HTTPAddr()+"/debug/configz", &v)
	return v
}

func (v configzView) source(kind, ns, name string) string {
	for _, r := range v.Resources {
		if r.Kind == kind && r.Namespace == ns && r.Name == name {
			return r.Source.Name
		}
	}
	return ""
}

// TestIstiodAsMCPUpstream: baremeshd subscribes to a real istiod as an
// MCP upstream. A ServiceEntry and a VirtualService created in the API
// server istiod watches appear in baremesh's store; a grpc-go xDS client
// served by baremeshd routes by the VirtualService, which exists only in
// istiod's store (the ServiceEntry, DestinationRule and WorkloadEntries of
// echo.mesh are baremesh files). Restarting istiod with nothing changed
// raises no store event and no push.
func TestIstiodAsMCPUpstream(t *testing.T) {
	if testing.Short() {
		t.Skip("starts kube-apiserver and istiod")
	}
	t.Run("SotW", func(t *testing.T) { testIstiodUpstream(t, false) })
	t.Run("Delta", func(t *testing.T) { testIstiodUpstream(t, true) })
}

func testIstiodUpstream(t *testing.T, delta bool) {
	ist := startIstiod(t)
	bs := map[string]*backend{"a1": startBackend(t, "a1"), "b1": startBackend(t, "b1")}
	versions := map[string]string{"a1": "v1", "b1": "v2"}
	m := startMeshMCP(t, map[string]string{"echo.yaml": echoService(bs, versions)},
		mcp.UpstreamConfig{Name: "istiod", Address: "xds://" + ist.grpcAddr, Delta: delta})

	ist.apply(`apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: ext, namespace: default}
spec:
  hosts: [ext.example.com]
  ports: [{number: 443, name: https, protocol: TLS}]
  resolution: DNS
`)
	start := time.Now()
	ist.apply(routes(0, 100, ""))
	testkit.EventuallyWithin(t, e2eWait, "istiod's VirtualService and ServiceEntry in baremesh's store", func() bool {
		v := m.configz(t)
		return v.source("VirtualService", "default", "echo") == "mcp:istiod" && v.source("ServiceEntry", "default", "ext") == "mcp:istiod"
	})
	t.Logf("apiserver create → in baremesh's store: %v (istiod's debounce included)", time.Since(start).Round(time.Millisecond))

	cc := m.xdsClient(t, "client")
	ctx := context.Background()
	allTo(t, ctx, cc, "b1") // the VirtualService sends everything to v2
	ist.apply(routes(100, 0, ""))
	allTo(t, ctx, cc, "a1") // an edit in the API server moves the traffic
	for i := 0; i < 20; i++ {
		if b, err := call(ctx, cc, "x-user", "jason"); err != nil || b != "b1" {
			t.Fatalf("x-user=jason went to %q (%v), want b1: the VirtualService's header match", b, err)
		}
	}

	st := m.configz(t).MCP
	// istiod also lists a ServiceEntry of its own, default/synthetic-
	// kubernetes (resolution STATIC, no endpoints), valid as in Istio: two
	// ServiceEntries, and nothing NACKed.
	if len(st) != 1 || !st[0].Connected || st[0].Resources["VirtualService"] != 1 || st[0].Resources["ServiceEntry"] != 2 || st[0].NACKs != 0 {
		t.Fatalf("configz mcp status = %+v", st)
	}
	t.Logf("status: connected %v, resources %v, responses %d, NACKs %d", st[0].Connected, st[0].Resources, st[0].Responses, st[0].NACKs)

	_, metrics := httpGet(t, "http://"+m.d.HTTPAddr()+"/metrics")
	for _, want := range []string{`baremesh_mcp_upstream_connected{upstream="istiod"} 1`, `baremesh_mcp_upstream_resources{kind="VirtualService",upstream="istiod"} 1`,
		`baremesh_mcp_upstream_resources{kind="ServiceEntry",upstream="istiod"} 2`, `baremesh_mcp_upstream_last_response_timestamp_seconds{upstream="istiod"}`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	t.Run("istiod restart raises no event and no push", func(t *testing.T) {
		before := m.d.Pipeline().Current().Version
		r0 := m.configz(t).MCP[0].Reconnects
		resp0 := m.configz(t).MCP[0].Responses
		ist.stop()
		ist.start()
		testkit.EventuallyWithin(t, e2eWait, "reconnected and resynced", func() bool {
			s := m.configz(t).MCP[0]
			return s.Reconnects > r0 && s.Connected && s.Responses >= resp0+uint64(len(mcp.DefaultTypeURLs()))
		})
		// A real change afterwards proves the stream is live; every push
		// before it would have been caused by the restart.
		ist.apply(routes(0, 100, ""))
		allTo(t, ctx, cc, "b1")
		after := m.d.Pipeline().Current().Version
		t.Logf("istiod restart: %d reconnect(s); snapshots built from the restart to the next real change: %d (that change's own included)", m.configz(t).MCP[0].Reconnects-r0, after-before)
		if after-before != 1 {
			t.Fatalf("istiod restart caused %d pushes beyond the real change", after-before-1)
		}
	})
}
