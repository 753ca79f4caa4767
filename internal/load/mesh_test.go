package load

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/baremesh/baremesh/core/testkit"
	"github.com/baremesh/baremesh/internal/daemon"
	"github.com/baremesh/baremesh/internal/daemonconfig"
)

func TestMain(m *testing.M) { testkit.Main(m.Run) }

// serviceEntry is service i of a test mesh: HTTP port 80 and gRPC port
// 7070, STATIC, with its endpoints inline.
func serviceEntry(name string, addrs ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: %s, namespace: default}
spec:
  hosts: [%s.load.mesh]
  ports:
  - {number: 80, name: http, protocol: HTTP}
  - {number: 7070, name: grpc, protocol: GRPC}
  resolution: STATIC
  endpoints:
`, name, name)
	for _, a := range addrs {
		fmt.Fprintf(&b, "  - {address: %s}\n", a)
	}
	return b.String()
}

// meshPolicy is the security policy of the scale mesh, as in issue #30's
// side-by-side run with istiod: STRICT mTLS mesh-wide (so every cluster
// carries auto-mTLS) and an AuthorizationPolicy on the proxies.
const meshPolicy = `apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: default, namespace: istio-system}
spec:
  mtls: {mode: STRICT}
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: load, namespace: default}
spec:
  selector: {matchLabels: {app: load}}
  action: ALLOW
  rules:
  - from: [{source: {namespaces: [default, istio-system]}}]
    to: [{operation: {methods: [GET, POST], paths: ["/api/*"]}}]
`

// writeMesh writes n services, one file each, and the mesh's policy into
// dir.
func writeMesh(tb testing.TB, dir string, n int) {
	tb.Helper()
	for i := range n {
		writeFile(tb, dir, svcName(i)+".yaml", serviceEntry(svcName(i), svcAddrs(i)...))
	}
	writeFile(tb, dir, "policy.yaml", meshPolicy)
}

// svcName and svcAddrs name service i and its four endpoints.
func svcName(i int) string { return fmt.Sprintf("svc-%04d", i) }

func svcAddrs(i int) []string {
	out := make([]string, 4)
	for k := range out {
		out[k] = fmt.Sprintf("10.%d.%d.%d", 100+k, i>>8, i&255)
	}
	return out
}

// host and cluster name service i's host and its outbound HTTP cluster
// (Istio's naming).
func host(name string) string      { return name + ".load.mesh" }
func cluster80(name string) string { return "outbound|80||" + host(name) }

// writeFile replaces dir/name atomically, as an editor or config
// management tool does.
func writeFile(tb testing.TB, dir, name, body string) {
	tb.Helper()
	tmp := filepath.Join(dir, "."+name+".tmp")
	if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
		tb.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		tb.Fatal(err)
	}
}

// startDaemon runs baremeshd in this process over a config directory
// holding n services, one file each, and returns its xDS address and
// the directory.
func startDaemon(t *testing.T, n int) (addr, dir string) {
	t.Helper()
	dir = t.TempDir()
	for i := range n {
		writeFile(t, dir, svcName(i)+".yaml", serviceEntry(svcName(i), svcAddrs(i)...))
	}
	cfg := daemonconfig.Defaults()
	cfg.ConfigDirs = []string{dir}
	cfg.XDSAddr, cfg.HTTPAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.MeshConfig = filepath.Join(dir, "no-meshconfig.yaml")
	cfg.Debounce = daemonconfig.Duration{Duration: 10 * time.Millisecond}
	level := slog.LevelWarn
	if os.Getenv("LOAD_DEBUG") != "" {
		level = slog.LevelDebug
	}
	d, err := daemon.New(cfg, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = d.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-d.Pipeline().Ready():
	case <-time.After(20 * time.Second):
		t.Fatal("daemon not ready")
	}
	return d.XDSAddr(), dir
}

// startInProcess is startProcess with the daemon in this process (daemon
// defaults, as the child process has), so a CPU profile covers it.
func startInProcess(tb testing.TB, n int, extra map[string]string) *daemonProc {
	dir := tb.TempDir()
	writeMesh(tb, dir, n)
	for name, body := range extra {
		writeFile(tb, dir, name, body)
	}
	cfg := daemonconfig.Defaults()
	cfg.ConfigDirs = []string{dir}
	cfg.XDSAddr, cfg.HTTPAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.MeshConfig = filepath.Join(dir, "no-meshconfig.yaml")
	d, err := daemon.New(cfg, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = d.Run(ctx) }()
	select {
	case <-d.Pipeline().Ready():
	case <-time.After(2 * time.Minute):
		tb.Fatal("daemon not ready")
	}
	return &daemonProc{pid: os.Getpid(), conf: dir, xds: d.XDSAddr(), http: d.HTTPAddr(), inproc: func() { cancel(); <-done }}
}
