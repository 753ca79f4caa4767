package e2e

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/baremesh/baremesh/core/testkit"
)

// jsClient is a running testdata/grpcjs_client.js: @grpc/grpc-js-xds
// (npm, installed by hack/deps.d/15-grpc-js-xds.sh) holding one channel
// to xds:///echo.mesh:7070, driven one command at a time.
type jsClient struct {
	t   *testing.T
	in  *json.Encoder
	out *bufio.Scanner
}

// npmModules is where hack/deps.d/15-grpc-js-xds.sh installs the npm
// packages.
func npmModules() string {
	dir := os.Getenv("BAREMESH_NPM_DIR")
	if dir == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			return ""
		}
		dir = filepath.Join(cache, "baremesh", "npm")
	}
	return filepath.Join(dir, "node_modules")
}

// startGRPCJS starts the client as the proxyless sidecar nodeID, or
// skips the test, saying why, when node or the package is missing.
func startGRPCJS(t *testing.T, m *mesh, nodeID string) *jsClient {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skipf("node not installed (`make test` installs Debian's nodejs): %v", err)
	}
	mods := npmModules()
	if _, err := os.Stat(filepath.Join(mods, "@grpc", "grpc-js-xds", "package.json")); err != nil {
		t.Skipf("@grpc/grpc-js-xds not installed in %s (`make test` runs hack/deps.d/15-grpc-js-xds.sh): %v", mods, err)
	}
	boot := filepath.Join(t.TempDir(), "bootstrap.json")
	if err := os.WriteFile(boot, m.bootstrap(nodeID), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, "testdata/grpcjs_client.js", "xds:///echo.mesh:7070")
	cmd.Env = append(os.Environ(), "GRPC_XDS_BOOTSTRAP="+boot, "NODE_PATH="+mods)
	cmd.Stderr = &testWriter{t: t, prefix: "grpc-js: "}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		in.Close() // the client exits when stdin closes
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	return &jsClient{t: t, in: json.NewEncoder(in), out: sc}
}

// run makes n RPCs (after a first successful one when wait) and returns
// the count of answers per backend and of errors per status code.
func (c *jsClient) run(n int, header string, wait bool) (backends, errors map[string]int) {
	c.t.Helper()
	if err := c.in.Encode(map[string]any{"n": n, "header": header, "wait": wait}); err != nil {
		c.t.Fatalf("grpc-js client: %v", err)
	}
	if !c.out.Scan() {
		c.t.Fatalf("grpc-js client exited: %v", c.out.Err())
	}
	var res struct {
		Backends map[string]int `json:"backends"`
		Errors   map[string]int `json:"errors"`
		Error    string         `json:"error"`
	}
	if err := json.Unmarshal(c.out.Bytes(), &res); err != nil {
		c.t.Fatalf("grpc-js client output %q: %v", c.out.Text(), err)
	}
	if res.Error != "" {
		c.t.Fatalf("grpc-js client: %s", res.Error)
	}
	return res.Backends, res.Errors
}

// allTo polls until n RPCs in a row without errors reach backend want.
func (c *jsClient) allTo(want string, n int) {
	c.t.Helper()
	var last map[string]int
	deadline := time.Now().Add(20 * time.Second)
	for {
		got, errs := c.run(n, "", false)
		if len(errs) == 0 && got[want] == n {
			return
		}
		last = got
		if time.Now().After(deadline) {
			c.t.Fatalf("grpc-js: traffic never all on %s; last %d RPCs: %v, errors %v", want, n, last, errs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// testWriter logs a subprocess's stderr lines into the test log.
type testWriter struct {
	t      *testing.T
	prefix string
}

func (w *testWriter) Write(p []byte) (int, error) {
	for _, l := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		w.t.Log(w.prefix + l)
	}
	return len(p), nil
}

// TestGRPCJSXDSClient: @grpc/grpc-js-xds, the third xDS client beside
// grpc-go and C-core, with baremeshd as its xDS server: the 80/20 split,
// the header match, a file edit that moves the traffic, LEAST_REQUEST
// (which it does not implement) taken as round_robin from the
// load_balancing_policy list, and a config it refuses shown as a NACK on
// /debug/syncz while the last good config keeps serving.
func TestGRPCJSXDSClient(t *testing.T) {
	bs := map[string]*backend{"a1": startBackend(t, "a1"), "b1": startBackend(t, "b1")}
	versions := map[string]string{"a1": "v1", "b1": "v2"}
	m := startMesh(t, map[string]string{"echo.yaml": echoService(bs, versions), "vs.yaml": routes(80, 20, "")})
	const id = "sidecar~127.0.0.1~grpcjs.default~default.svc.cluster.local"
	c := startGRPCJS(t, m, id)

	got, errs := c.run(500, "", true)
	if len(errs) > 0 || got["a1"] < 350 || got["a1"] > 450 || got["a1"]+got["b1"] != 500 {
		t.Fatalf("grpc-js 80/20 split over 500 RPCs: %v, errors %v", got, errs)
	}
	t.Logf("grpc-js split: %v", got)

	if got, errs := c.run(20, "x-user=jason", false); got["b1"] != 20 {
		t.Fatalf("grpc-js header match: %v (errors %v), want all 20 on b1", got, errs)
	}

	m.write("vs.yaml", routes(0, 100, ""))
	c.allTo("b1", 20)
	m.write("vs.yaml", routes(100, 0, ""))
	c.allTo("a1", 20)

	// LEAST_REQUEST: the legacy lb_policy LEAST_REQUEST is NACKed by
	// grpc-js; the load_balancing_policy list must be ACKed and serve.
	before := cdsStatus(t, m, id)
	m.write("echo.yaml", echoServicePolicy(bs, versions, "{loadBalancer: {simple: LEAST_REQUEST}}"))
	m.write("vs.yaml", routes(50, 50, ""))
	testkit.Eventually(t, "grpc-js answers the LEAST_REQUEST clusters", func() bool {
		st := cdsStatus(t, m, id)
		return st.SentVersion != before.SentVersion && (st.AckedVer == st.SentVersion || st.LastNack != nil)
	})
	if st := cdsStatus(t, m, id); st.Nacks != 0 || st.LastNack != nil {
		t.Fatalf("grpc-js NACKed CDS: %d NACKs, last: %+v", st.Nacks, st.LastNack)
	}
	got, errs = c.run(200, "", false)
	if len(errs) > 0 || got["a1"] < 50 || got["b1"] < 50 {
		t.Fatalf("grpc-js with LEAST_REQUEST, 50/50 split over 200 RPCs: %v, errors %v", got, errs)
	}
	t.Logf("grpc-js LEAST_REQUEST (as round_robin), 50/50 split: %v", got)

	// A ring larger than gRPC's limit of 8M entries: grpc-js NACKs the
	// clusters (as Envoy would), syncz shows it, traffic goes on.
	m.write("echo.yaml", echoServicePolicy(bs, versions, "{loadBalancer: {consistentHash: {httpHeaderName: x-user, ringHash: {minimumRingSize: 10000000}}}}"))
	var nack *syncNack
	testkit.Eventually(t, "the NACK on /debug/syncz", func() bool {
		nack = cdsStatus(t, m, id).LastNack
		return nack != nil
	})
	if !strings.Contains(nack.Message, "minimum_ring_size") {
		t.Fatalf("NACK message %q does not name minimum_ring_size", nack.Message)
	}
	t.Logf("syncz NACK from grpc-js: %s", nack.Message)
	if got, errs := c.run(20, "", false); len(errs) > 0 || got["a1"]+got["b1"] != 20 {
		t.Fatalf("after the NACK, RPCs on the last good config: %v, errors %v", got, errs)
	}
}

type syncNack struct {
	Version string `json:"version"`
	Message string `json:"message"`
}

type syncType struct {
	Type        string    `json:"type"`
	SentVersion string    `json:"sentVersion"`
	AckedVer    string    `json:"ackedVersion"`
	Nacks       int       `json:"nacks"`
	LastNack    *syncNack `json:"lastNack"`
}

// cdsStatus is proxy id's CDS state on /debug/syncz (zero when it has
// none yet).
func cdsStatus(t *testing.T, m *mesh, id string) syncType {
	t.Helper()
	var proxies []struct {
		ID    string     `json:"id"`
		Types []syncType `json:"types"`
	}
	getJSON(t, "http://"+m.d.HTTPAddr()+"/debug/syncz", &proxies)
	for _, p := range proxies {
		if p.ID != id {
			continue
		}
		for _, st := range p.Types {
			if st.Type == "cds" {
				return st
			}
		}
	}
	return syncType{}
}
