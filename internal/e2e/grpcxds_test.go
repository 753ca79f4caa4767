package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	// registers the xds resolver, balancers and HTTP filters

	"github.com/baremesh/baremesh/core/testkit"
)

func echoService(backends map[string]*backend, versions map[string]string) string {
	return echoServicePolicy(backends, versions, "")
}

// echoServicePolicy is echo.mesh, its subsets v1 and v2, and a
// WorkloadEntry per backend labelled with its version; policy, when
// set, is the DestinationRule's trafficPolicy (YAML flow style).
func echoServicePolicy(backends map[string]*backend, versions map[string]string, policy string) string {
	var sb strings.Builder
	if policy != "" {
		policy = "  trafficPolicy: " + policy + "\n"
	}
	fmt.Fprintf(&sb, `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: echo, namespace: default}
spec:
  hosts: [echo.mesh]
  ports: [{number: 7070, name: grpc, protocol: GRPC}]
  resolution: STATIC
  workloadSelector: {labels: {app: echo}}
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: echo, namespace: default}
spec:
  host: echo.mesh
%s  subsets:
  - {name: v1, labels: {version: v1}}
  - {name: v2, labels: {version: v2}}
`, policy)
	for name, b := range backends {
		fmt.Fprintf(&sb, `---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: %s, namespace: default}
spec:
  address: 127.0.0.1
  ports: {grpc: %d}
  labels: {app: echo, version: %s}
`, name, b.port, versions[name])
	}
	return sb.String()
}

// routes is the VirtualService for echo.mesh: a header match to v2, then
// the default route's weights and extra route settings.
func routes(v1, v2 int, extra string) string {
	return fmt.Sprintf(`apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: echo, namespace: default}
spec:
  hosts: [echo.mesh]
  http:
  - match:
    - headers:
        x-user: {exact: jason}
    route:
    - destination: {host: echo.mesh, subset: v2}
  - route:
    - destination: {host: echo.mesh, subset: v1}
      weight: %d
    - destination: {host: echo.mesh, subset: v2}
      weight: %d
%s`, v1, v2, extra)
}

// TestGRPCGoXDSClient: grpc-go's own xDS client, with baremeshd as its
// xDS server, reaches backends that exist only as WorkloadEntries, and
// follows edits of the config files without a restart.
func TestGRPCGoXDSClient(t *testing.T) {
	bs := map[string]*backend{"a1": startBackend(t, "a1"), "a2": startBackend(t, "a2"), "b1": startBackend(t, "b1")}
	versions := map[string]string{"a1": "v1", "a2": "v1", "b1": "v2"}
	m := startMesh(t, map[string]string{"echo.yaml": echoService(bs, versions), "vs.yaml": routes(80, 20, "")})

	cc := m.xdsClient(t, "client")
	ctx := context.Background()

	// Wait for the first successful call: config is in place.
	testkit.EventuallyWithin(t, e2eWait, "first RPC through xDS", func() bool { _, err := call(ctx, cc); return err == nil })

	t.Run("weights 80/20 over 1000 RPCs", func(t *testing.T) {
		counts := map[string]int{}
		for i := 0; i < 1000; i++ {
			b, err := call(ctx, cc)
			if err != nil {
				t.Fatalf("rpc %d: %v", i, err)
			}
			counts[versions[b]]++
		}
		if counts["v1"] < 750 || counts["v1"] > 850 || counts["v1"]+counts["v2"] != 1000 {
			t.Fatalf("v1/v2 = %d/%d, want 800/200 ±50", counts["v1"], counts["v2"])
		}
		t.Logf("v1/v2 = %d/%d", counts["v1"], counts["v2"])
	})

	t.Run("header match routes to a subset", func(t *testing.T) {
		for i := 0; i < 50; i++ {
			b, err := call(ctx, cc, "x-user", "jason")
			if err != nil || b != "b1" {
				t.Fatalf("call %d with x-user=jason went to %q (%v), want b1 (v2)", i, b, err)
			}
		}
	})

	t.Run("editing the file moves the traffic", func(t *testing.T) {
		m.write("vs.yaml", routes(0, 100, ""))
		allTo(t, ctx, cc, "b1")
		m.write("vs.yaml", routes(100, 0, ""))
		testkit.EventuallyWithin(t, e2eWait, "traffic back on v1", func() bool {
			for i := 0; i < 20; i++ {
				if b, err := call(ctx, cc); err != nil || versions[b] != "v1" {
					return false
				}
			}
			return true
		})
	})

	t.Run("a removed endpoint stops receiving traffic", func(t *testing.T) {
		delete(bs, "a2")
		m.write("echo.yaml", echoService(bs, versions))
		allTo(t, ctx, cc, "a1")
	})

	t.Run("retry policy takes effect", func(t *testing.T) {
		a1 := bs["a1"]
		a1.mu.Lock()
		a1.failEvery = 2 // every other call fails with UNAVAILABLE
		a1.mu.Unlock()
		defer func() { a1.mu.Lock(); a1.failEvery = 0; a1.mu.Unlock() }()
		succeedAll := func() bool {
			for i := 0; i < 50; i++ {
				if _, err := call(ctx, cc); err != nil {
					return false
				}
			}
			return true
		}
		// A route without retries gets Istio's default policy (2 retries,
		// on unavailable among others), as istiod gives proxyless clients.
		testkit.EventuallyWithin(t, e2eWait, "50 calls in a row succeed with Istio's default retries", succeedAll)
		m.write("vs.yaml", routes(100, 0, "    retries: {attempts: 0}\n"))
		testkit.EventuallyWithin(t, e2eWait, "with retries off, injected failures reach the client", func() bool {
			failures := 0
			for i := 0; i < 20; i++ {
				if _, err := call(ctx, cc); status.Code(err) == codes.Unavailable {
					failures++
				}
			}
			return failures > 0
		})
		m.write("vs.yaml", routes(100, 0, "    retries: {attempts: 3, retryOn: unavailable}\n"))
		testkit.EventuallyWithin(t, e2eWait, "50 calls in a row succeed with retries", func() bool {
			for i := 0; i < 50; i++ {
				if _, err := call(ctx, cc); err != nil {
					return false
				}
			}
			return true
		})
	})

	t.Run("fault abort takes effect", func(t *testing.T) {
		m.write("vs.yaml", routes(100, 0, "    fault: {abort: {httpStatus: 503, percentage: {value: 100}}}\n"))
		testkit.EventuallyWithin(t, e2eWait, "calls aborted by the fault", func() bool {
			before := bs["a1"].callCount()
			for i := 0; i < 10; i++ {
				if _, err := call(ctx, cc); status.Code(err) != codes.Unavailable {
					return false
				}
			}
			return bs["a1"].callCount() == before
		})
	})
}

// allTo polls until 30 calls in a row reach backend want.
func allTo(t *testing.T, ctx context.Context, cc *grpc.ClientConn, want string) {
	t.Helper()
	var last string
	defer func() {
		if t.Failed() {
			t.Logf("last call: %s", last)
		}
	}()
	testkit.EventuallyWithin(t, e2eWait, "all traffic to "+want, func() bool {
		for i := 0; i < 30; i++ {
			if b, err := call(ctx, cc); err != nil || b != want {
				last = fmt.Sprintf("backend %q, err %v", b, err)
				return false
			}
		}
		return true
	})
}

// TestPushDebugAndConvergence: after an edit, /debug/pushz lists the push
// with what triggered it and what it sent, and the convergence histogram
// (change → ACK) has observations.
func TestPushDebugAndConvergence(t *testing.T) {
	bs := map[string]*backend{"a1": startBackend(t, "a1"), "b1": startBackend(t, "b1")}
	versions := map[string]string{"a1": "v1", "b1": "v2"}
	m := startMesh(t, map[string]string{"echo.yaml": echoService(bs, versions), "vs.yaml": routes(100, 0, "")})
	cc := m.xdsClient(t, "pushz")
	ctx := context.Background()
	allTo(t, ctx, cc, "a1")
	m.write("vs.yaml", routes(0, 100, ""))
	allTo(t, ctx, cc, "b1")
	type view struct {
		Reasons   map[string]int `json:"reasons"`
		Configs   []string       `json:"configs"`
		Done      int            `json:"proxiesDone"`
		Responses map[string]int `json:"responsesByType"`
	}
	var pushes []view
	getJSON(t, "http://"+m.d.HTTPAddr()+"/debug/pushz", &pushes)
	found := false
	for _, p := range pushes {
		if p.Reasons["config"] > 0 && slices.Contains(p.Configs, "VirtualService/default/echo") && p.Done == 1 && p.Responses["rds"] == 1 && p.Responses["cds"] == 0 {
			found = true // a VirtualService edit sends RDS, not CDS
		}
	}
	if !found {
		t.Fatalf("pushz has no VirtualService push that sent RDS only: %+v", pushes)
	}
	_, metrics := httpGet(t, "http://"+m.d.HTTPAddr()+"/metrics")
	if !regexp.MustCompile(`baremesh_xds_convergence_seconds_count\{type="rds"\} [1-9]`).MatchString(metrics) {
		t.Fatalf("no RDS convergence observations in /metrics")
	}
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	_, body := httpGet(t, url)
	if err := json.Unmarshal([]byte(body), v); err != nil {
		t.Fatalf("%s: %v", url, err)
	}
}
