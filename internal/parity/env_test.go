package parity

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/baremesh/baremesh/internal/daemon"
	"github.com/baremesh/baremesh/internal/daemonconfig"
	"github.com/baremesh/baremesh/sources/kube/kubetest"
)

// istiod is Istio's pilot-discovery (shared/tools/istio-bins) over a test
// kube-apiserver (shared/tools/kube-assets, through envtest) with Istio's
// CRDs: the oracle. Scenarios reach it as custom resources.
type istiod struct {
	grpcAddr, httpAddr string
	dir                string
	cs                 kubernetes.Interface
	dyn                dynamic.Interface
	// applied is every document in the API server, by kind/namespace/name.
	applied map[string]applied

	// mesh is the mesh config istiod was last given (setMesh), meshGen
	// counts the changes.
	mesh    string
	meshGen int
	// probe sees istiod's full pushes (setMesh); started on first use.
	probe *pushProbe
}

// applied is a document in the API server and its resource version.
type applied struct {
	gvr          schema.GroupVersionResource
	ns, name, rv string
	// created is the object's creationTimestamp (RFC 3339) on the API
	// server: istiod orders conflicting rules by it.
	created string
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

// startIstiod starts kube-apiserver and istiod with Istio's default mesh
// config, or skips t naming what is missing. Every process is stopped
// when t ends, failed or not.
func startIstiod(t *testing.T) *istiod {
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
	crdPaths := []string{crds}
	// The Gateway API's CRDs (standard channel: TCPRoute and TLSRoute are
	// there from v1.5), so istiod's gateway controller runs (#28).
	if gw := findOne(filepath.Join(gomod, "sigs.k8s.io", "gateway-api@v1.*", "config", "crd", "standard")); gw != "" {
		files, _ := filepath.Glob(filepath.Join(gw, "gateway.networking.k8s.io_*.yaml"))
		for _, f := range files {
			if !strings.Contains(f, "vap_") {
				crdPaths = append(crdPaths, f)
			}
		}
	}
	api := &envtest.Environment{BinaryAssetsDirectory: assets, CRDInstallOptions: envtest.CRDInstallOptions{Paths: crdPaths},
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
	i := &istiod{dir: t.TempDir(), grpcAddr: freeAddr(t), httpAddr: freeAddr(t), applied: map[string]applied{}}
	i.cs = kubernetes.NewForConfigOrDie(cfg)
	i.dyn = dynamic.NewForConfigOrDie(cfg)
	must(t, os.WriteFile(filepath.Join(i.dir, "kubeconfig"), kc, 0o600))
	must(t, os.WriteFile(filepath.Join(i.dir, "mesh.yaml"), []byte("{}\n"), 0o644))
	i.namespace(t, "istio-system")
	logf, err := os.Create(filepath.Join(i.dir, "istiod.log"))
	must(t, err)
	cmd := exec.Command(bin, "discovery", "--kubeconfig", filepath.Join(i.dir, "kubeconfig"),
		"--grpcAddr", i.grpcAddr, "--httpAddr", i.httpAddr, "--monitoringAddr", freeAddr(t),
		"--secureGRPCAddr=", "--httpsAddr=", "--meshConfig", filepath.Join(i.dir, "mesh.yaml"))
	cmd.Env = append(os.Environ(), "POD_NAMESPACE=istio-system")
	cmd.Stdout, cmd.Stderr, cmd.Dir = logf, logf, i.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	must(t, cmd.Start())
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // the whole process group
		_ = cmd.Wait()
		logf.Close()
		if p := os.Getenv("PARITY_ISTIOD_LOG"); p != "" {
			b, _ := os.ReadFile(logf.Name())
			_ = os.WriteFile(p, b, 0o644)
		}
	})
	deadline := time.Now().Add(90 * time.Second)
	for {
		resp, err := http.Get("http://" + i.httpAddr + "/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return i
			}
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(logf.Name())
			t.Fatalf("istiod not ready within 90s; log tail:\n%s", tail(string(b), 3000))
		}
		time.Sleep(100 * time.Millisecond) // polling istiod's readiness, not synchronisation
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func (i *istiod) namespace(t *testing.T, ns string) {
	t.Helper()
	_, err := i.cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("namespace %s: %v", ns, err)
	}
}

func docKey(d Doc) string { return d.Kind + "/" + d.Namespace + "/" + d.Name }

func gvr(obj map[string]any) schema.GroupVersionResource {
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

// apply makes the API server hold exactly docs (deleting what an earlier
// scenario applied and this one lacks) and waits until istiod's config
// store (/debug/configz) holds the same versions and istiod has pushed
// them (pushProbe).
func (i *istiod) apply(t *testing.T, docs []Doc) {
	t.Helper()
	ctx := context.Background()
	if i.probe == nil {
		i.probe = startProbe(t, i.grpcAddr)
	}
	want := map[string]Doc{}
	for _, d := range docs {
		want[docKey(d)] = d
	}
	for k, d := range i.applied {
		if _, keep := want[k]; !keep {
			err := i.dyn.Resource(d.gvr).Namespace(d.ns).Delete(ctx, d.name, metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				t.Fatalf("delete %s: %v", k, err)
			}
			delete(i.applied, k)
		}
	}
	for _, d := range docs {
		i.namespace(t, d.Namespace)
	}
	existed := map[string]bool{}
	for k := range i.applied {
		existed[k] = true
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	work := make(chan Doc)
	errs := make(chan error, len(docs))
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for d := range work {
				rv, created, err := i.put(ctx, d, existed[docKey(d)])
				if err != nil {
					errs <- fmt.Errorf("apply %s (%v): %w", docKey(d), gvr(d.Object), err)
					continue
				}
				mu.Lock()
				i.applied[docKey(d)] = applied{gvr: gvr(d.Object), ns: d.Namespace, name: d.Name, rv: rv, created: created}
				mu.Unlock()
			}
		}()
	}
	for _, d := range docs {
		work <- d
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		missing := i.inStore()
		if missing == "" {
			// The store holds it; the push context a connecting proxy
			// gets follows with istiod's next full push, which the probe
			// sees. A push counted before now may have started before
			// the last write (its context lacks it) and so may the first
			// one counted after: wait for a push after now, then until
			// pushes stop (istiod debounces 100 ms after the last
			// event). A change no proxy needs pushes nothing: then the
			// wait ends after 2 s and the run goes on. The quiet window
			// grows with the scenario: the push counted after now may
			// have started before the last events, and the one that
			// follows takes longer to compute than 400 ms for a thousand
			// gateways (a full make parity once saw istiod answer
			// bench/gateways from a context lacking 67 of its services).
			quiet := 400*time.Millisecond + time.Duration(len(docs))*time.Millisecond
			i.probe.settle(i.probe.n.Load(), 2*time.Second, quiet)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("istiod's config store lacks the scenario after 30s: %s", missing)
		}
		time.Sleep(50 * time.Millisecond) // polling istiod's store, not synchronisation
	}
}

// put creates or updates one document and returns its resource version
// and creation timestamp.
func (i *istiod) put(ctx context.Context, d Doc, exists bool) (rv, created string, err error) {
	u := &unstructured.Unstructured{Object: d.Object}
	rc := i.dyn.Resource(gvr(d.Object)).Namespace(d.Namespace)
	stamp := func(o *unstructured.Unstructured) string {
		return o.GetCreationTimestamp().UTC().Format(time.RFC3339)
	}
	if exists {
		// istiod writes status too: a conflict is retried on the new version.
		err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur, err := rc.Get(ctx, d.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			u := u.DeepCopy()
			u.SetResourceVersion(cur.GetResourceVersion())
			out, err := rc.Update(ctx, u, metav1.UpdateOptions{})
			if err == nil {
				rv, created = out.GetResourceVersion(), stamp(out)
			}
			return err
		})
		if err == nil || !apierrors.IsNotFound(err) {
			return rv, created, err
		}
	}
	out, err := rc.Create(ctx, u.DeepCopy(), metav1.CreateOptions{})
	if err != nil {
		return "", "", err
	}
	return out.GetResourceVersion(), stamp(out), nil
}

// stampCreation gives docs the creation timestamps the API server gave
// them, so baremeshd, reading them from files, orders conflicting rules
// (istiod: by creation time, then name) as istiod does.
func (i *istiod) stampCreation(docs []Doc) {
	for _, d := range docs {
		a, ok := i.applied[docKey(d)]
		if !ok || a.created == "" {
			continue
		}
		if md, ok := d.Object["metadata"].(map[string]any); ok {
			md["creationTimestamp"] = a.created
		}
	}
}

// inStore says what istiod's store lacks or holds too much of, or "".
func (i *istiod) inStore() string {
	resp, err := http.Get("http://" + i.httpAddr + "/debug/configz")
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var list []struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name, Namespace, ResourceVersion string
		} `json:"metadata"`
	}
	if err := json.Unmarshal(b, &list); err != nil {
		return "configz: " + err.Error()
	}
	have := map[string]string{}
	for _, c := range list {
		have[c.Kind+"/"+c.Metadata.Namespace+"/"+c.Metadata.Name] = c.Metadata.ResourceVersion
	}
	for k, d := range i.applied {
		rv, ok := have[k]
		if !ok {
			return "no " + k
		}
		// istiod may write status (a newer version); older is stale.
		if got, err1 := strconv.ParseUint(rv, 10, 64); err1 == nil {
			if want, err2 := strconv.ParseUint(d.rv, 10, 64); err2 == nil && got < want {
				return fmt.Sprintf("%s at version %s, want %s or later", k, rv, d.rv)
			}
		}
		delete(have, k)
	}
	for k := range have {
		if strings.Contains(k, "~") {
			continue // istiod's conversion of Gateway API objects
		}
		if kind, _, _ := strings.Cut(k, "/"); kindOfOurs(kind) {
			return "still " + k
		}
	}
	return ""
}

// kindOfOurs: kinds scenarios may hold (others in istiod's store are its
// own, e.g. from the Kubernetes registry).
func kindOfOurs(kind string) bool {
	switch kind {
	case "ServiceEntry", "WorkloadEntry", "WorkloadGroup", "VirtualService", "DestinationRule", "Gateway",
		"Sidecar", "PeerAuthentication", "AuthorizationPolicy", "RequestAuthentication",
		"HTTPRoute", "GRPCRoute", "TCPRoute", "TLSRoute", "ReferenceGrant":
		return true
	}
	return false
}

// baremeshd runs the daemon in-process over a directory holding the
// scenario as one file, with Istio's default mesh config; stop ends it.
func startBaremesh(t *testing.T, config []byte, mesh ...string) (addr string, stop func()) {
	t.Helper()
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "scenario.yaml"), config, 0o644))
	if len(mesh) > 0 && mesh[0] != "" { // a scenario's mesh config (mesh_test.go)
		must(t, os.WriteFile(filepath.Join(dir, "meshconfig.yaml"), []byte(mesh[0]), 0o644))
	}
	cfg := daemonconfig.Defaults()
	cfg.ConfigDirs = []string{dir}
	cfg.XDSAddr, cfg.HTTPAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.MeshConfig = filepath.Join(dir, "meshconfig.yaml")
	cfg.StateDir = filepath.Join(dir, "state")
	cfg.CredentialsDir = filepath.Join(dir, "credentials")
	cfg.Debounce = daemonconfig.Duration{Duration: 10 * time.Millisecond}
	level := slog.LevelError
	if os.Getenv("PARITY_DEBUG") != "" {
		level = slog.LevelDebug
	}
	d, err := daemon.New(cfg, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})))
	if err != nil {
		t.Fatalf("baremeshd: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = d.Run(ctx) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	select {
	case <-d.Pipeline().Ready():
	case <-time.After(30 * time.Second):
		t.Fatal("baremeshd not ready within 30s")
	}
	return d.XDSAddr(), stop
}
