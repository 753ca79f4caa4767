package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestCCoreXDSClient: gRPC C-core, an xDS client independent of grpc-go
// (Debian's python3-grpcio, installed by `make test`), gets its config
// from baremeshd: the 80/20 split, the header match, and LEAST_REQUEST
// taken as round_robin.
func TestCCoreXDSClient(t *testing.T) {
	py := "/usr/bin/python3"
	if err := exec.Command(py, "-c", "import grpc").Run(); err != nil {
		t.Skipf("gRPC C-core not installed (python3-grpcio; `make test` installs it): %v", err)
	}
	bs := map[string]*backend{"a1": startBackend(t, "a1"), "b1": startBackend(t, "b1")}
	versions := map[string]string{"a1": "v1", "b1": "v2"}
	m := startMesh(t, map[string]string{"echo.yaml": echoService(bs, versions), "vs.yaml": routes(80, 20, "")})
	run := cCoreRunner(t, py, m)
	got := run(500, "")
	if got["a1"] < 350 || got["a1"] > 450 || got["a1"]+got["b1"] != 500 {
		t.Fatalf("C-core 80/20 split over 500 RPCs: %v", got)
	}
	t.Logf("C-core split: %v", got)
	if got := run(20, "x-user=jason"); got["b1"] != 20 {
		t.Fatalf("C-core header match: %v, want all 20 on b1", got)
	}

	// LEAST_REQUEST, which C-core does not implement (it NACKs the legacy
	// lb_policy LEAST_REQUEST): round_robin from the policy list.
	m = startMesh(t, map[string]string{"echo.yaml": echoServicePolicy(bs, versions, "{loadBalancer: {simple: LEAST_REQUEST}}"), "vs.yaml": routes(50, 50, "")})
	got = cCoreRunner(t, py, m)(100, "")
	if got["a1"] < 25 || got["b1"] < 25 || got["a1"]+got["b1"] != 100 {
		t.Fatalf("C-core with LEAST_REQUEST, 50/50 split over 100 RPCs: %v", got)
	}
	t.Logf("C-core LEAST_REQUEST (as round_robin), 50/50 split: %v", got)
}

// cCoreRunner returns a function that runs testdata/ccore_client.py as a
// proxyless client of m: n RPCs (with header K=V when set), the count of
// answers per backend; any RPC error fails the test.
func cCoreRunner(t *testing.T, py string, m *mesh) func(n int, header string) map[string]int {
	t.Helper()
	boot := filepath.Join(t.TempDir(), "bootstrap.json")
	if err := os.WriteFile(boot, m.bootstrap("sidecar~127.0.0.1~ccore.default~default.svc.cluster.local"), 0o644); err != nil {
		t.Fatal(err)
	}
	return func(n int, header string) map[string]int {
		t.Helper()
		args := []string{"testdata/ccore_client.py", "xds:///echo.mesh:7070", itoa(n)}
		if header != "" {
			args = append(args, header)
		}
		cmd := exec.Command(py, args...)
		cmd.Env = append(os.Environ(), "GRPC_XDS_BOOTSTRAP="+boot)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("C-core client: %v: %s", err, out)
		}
		var res struct {
			Backends map[string]int `json:"backends"`
			Errors   map[string]int `json:"errors"`
		}
		if err := json.Unmarshal(out, &res); err != nil {
			t.Fatalf("C-core client output %q: %v", out, err)
		}
		if len(res.Errors) > 0 {
			t.Fatalf("C-core RPC errors: %v", res.Errors)
		}
		return res.Backends
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }
