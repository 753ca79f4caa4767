package parity

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
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

	"github.com/baremesh/baremesh/internal/daemon"
	"github.com/baremesh/baremesh/internal/daemonconfig"
	"github.com/baremesh/baremesh/internal/istiodtest"
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
	// networks is the meshNetworks istiod was last given (setNetworks).
	networks string
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

// startIstiod starts kube-apiserver (with Istio's and the Gateway API's
// CRDs, so istiod's gateway controller runs, #28) and istiod with
// Istio's default mesh config, or skips t naming what is missing. Every
// process is stopped when t ends, failed or not; PARITY_ISTIOD_LOG gets
// a copy of istiod's log.
func startIstiod(t *testing.T) *istiod {
	t.Helper()
	it := istiodtest.Start(t, istiodtest.Options{GatewayAPI: true, LogCopy: os.Getenv("PARITY_ISTIOD_LOG")})
	return &istiod{dir: it.Dir, grpcAddr: it.XDSAddr, httpAddr: it.DebugAddr, cs: it.Kube, dyn: it.Dynamic, applied: map[string]applied{}}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func (i *istiod) namespace(t *testing.T, ns string) {
	t.Helper()
	_, err := i.cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("namespace %s: %v", ns, err)
	}
}

func docKey(d Doc) string { return d.Kind + "/" + d.Namespace + "/" + d.Name }

// gvr is the resource of a scenario document's kind.
func gvr(obj map[string]any) schema.GroupVersionResource { return istiodtest.GVR(obj) }

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
	var apart []Doc
	for _, d := range docs {
		if d.Apart {
			apart = append(apart, d)
			continue
		}
		work <- d
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	i.createApart(t, apart)
	deadline := time.Now().Add(30 * time.Second)
	for {
		missing := i.inStore()
		if missing == "" {
			// Then the registry: a ServiceEntry istiod drops (one it
			// finds invalid) never appears there, so this wait is
			// bounded and only logged.
			regDeadline := time.Now().Add(10 * time.Second)
			for r := i.inRegistry(docs); r != ""; r = i.inRegistry(docs) {
				if time.Now().After(regDeadline) {
					t.Logf("istiod's registry after 10s: %s (going on)", r)
					break
				}
				time.Sleep(50 * time.Millisecond) // polling istiod's registry, not synchronisation
			}
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

// createApart creates docs one at a time, each in a later second than
// the one before, as new objects (one an earlier scenario left is
// deleted first: an update keeps its old creation time).
func (i *istiod) createApart(t *testing.T, docs []Doc) {
	t.Helper()
	ctx := context.Background()
	var last time.Time
	for _, d := range docs {
		k := docKey(d)
		if a, ok := i.applied[k]; ok {
			rc := i.dyn.Resource(a.gvr).Namespace(a.ns)
			if err := rc.Delete(ctx, a.name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Fatalf("delete %s: %v", k, err)
			}
			delete(i.applied, k)
		}
		// The API server stamps its own clock, this machine's: wait
		// for the second after the last creation to begin.
		for !last.IsZero() && !time.Now().UTC().Truncate(time.Second).After(last) {
			time.Sleep(20 * time.Millisecond) // waiting for the clock, not for another goroutine
		}
		rv, created, err := i.put(ctx, d, false)
		if err != nil {
			t.Fatalf("apply %s (%v): %v", k, gvr(d.Object), err)
		}
		i.applied[k] = applied{gvr: gvr(d.Object), ns: d.Namespace, name: d.Name, rv: rv, created: created}
		if last, err = time.Parse(time.RFC3339, created); err != nil {
			t.Fatalf("%s: creation timestamp %q: %v", k, created, err)
		}
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
// inRegistry says what of docs' ServiceEntry hosts istiod's service
// registry (/debug/registryz) lacks, or still holds of an earlier
// scenario's, or "" when it holds exactly these. The config store
// having an object is not enough: istiod's ServiceEntry controller
// takes it from the store on a queue of its own and only then asks for
// the push, and on a busy machine the probe's quiet window could pass in
// between, so the run read istiod's output from a context with the
// earlier scenario's services. (gen/sidecar-http's wildcard 9080
// listener, which differed in cold make test runs and was once blamed on
// this, was ours: the services' ages decide it; see order/http-first.)
func (i *istiod) inRegistry(docs []Doc) string {
	want := map[string]bool{}
	for _, d := range docs {
		if d.Kind != "ServiceEntry" {
			continue
		}
		spec, _ := d.Object["spec"].(map[string]any)
		hosts, _ := spec["hosts"].([]any)
		for _, h := range hosts {
			if h, ok := h.(string); ok {
				want[h] = true
			}
		}
	}
	var list []struct {
		Hostname   string `json:"hostname"`
		Attributes struct {
			ServiceRegistry string `json:"ServiceRegistry"`
		} `json:"Attributes"`
	}
	if err := i.debugJSON("registryz", &list); err != nil {
		return err.Error()
	}
	have := map[string]bool{}
	for _, svc := range list {
		have[svc.Hostname] = true
		if svc.Attributes.ServiceRegistry == "External" && !want[svc.Hostname] {
			return "registry still has " + svc.Hostname
		}
	}
	for h := range want {
		if !have[h] {
			return "registry lacks " + h
		}
	}
	return ""
}

// debugJSON reads istiod's /debug/NAME into v.
func (i *istiod) debugJSON(name string, v any) error {
	resp, err := http.Get("http://" + i.httpAddr + "/debug/" + name)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

func (i *istiod) inStore() string {
	var list []struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name, Namespace, ResourceVersion string
		} `json:"metadata"`
	}
	if err := i.debugJSON("configz", &list); err != nil {
		return err.Error()
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
// scenario as one file, with Istio's default mesh config (or mesh, a
// scenario's) and no meshNetworks (or networks, a scenario's); stop ends
// it.
func startBaremesh(t *testing.T, config []byte, mesh, networks string) (addr string, stop func()) {
	t.Helper()
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "scenario.yaml"), config, 0o644))
	if mesh != "" { // a scenario's mesh config (mesh_test.go)
		must(t, os.WriteFile(filepath.Join(dir, "meshconfig.yaml"), []byte(mesh), 0o644))
	}
	if networks != "" { // a scenario's meshNetworks (networks_test.go)
		must(t, os.WriteFile(filepath.Join(dir, "meshnetworks.yaml"), []byte(networks), 0o644))
	}
	cfg := daemonconfig.Defaults()
	cfg.ConfigDirs = []string{dir}
	cfg.XDSAddr, cfg.HTTPAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.MeshConfig = filepath.Join(dir, "meshconfig.yaml")
	cfg.MeshNetworks = filepath.Join(dir, "meshnetworks.yaml")
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
