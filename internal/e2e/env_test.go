package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/xds"

	"github.com/baremesh/baremesh/internal/daemon"
	"github.com/baremesh/baremesh/internal/daemonconfig"
)

// mesh is a running baremeshd over a temporary config directory.
type mesh struct {
	t   testing.TB
	dir string
	d   *daemon.Daemon
	// stop stops the daemon (also at the test's end); idempotent.
	stop func()
}

func startMesh(t *testing.T, files map[string]string) *mesh {
	t.Helper()
	return startMeshWith(t, files, nil)
}

// startMeshWith is startMesh with changes to the daemon's configuration.
func startMeshWith(t testing.TB, files map[string]string, configure func(*daemonconfig.Config)) *mesh {
	t.Helper()
	m := &mesh{t: t, dir: t.TempDir()}
	for name, body := range files {
		m.write(name, body)
	}
	cfg := daemonconfig.Defaults()
	cfg.ConfigDirs = []string{m.dir}
	cfg.XDSAddr, cfg.HTTPAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.MeshConfig = filepath.Join(m.dir, "no-meshconfig.yaml")
	cfg.Debounce = daemonconfig.Duration{Duration: 10 * time.Millisecond}
	if configure != nil {
		configure(&cfg)
	}
	level := slog.LevelWarn
	if os.Getenv("E2E_DEBUG") != "" {
		level = slog.LevelDebug
	}
	d, err := daemon.New(cfg, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})))
	if err != nil {
		t.Fatal(err)
	}
	m.d = d
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = d.Run(ctx) }()
	m.stop = func() { cancel(); <-done }
	t.Cleanup(m.stop)
	select {
	case <-d.Pipeline().Ready():
	case <-time.After(30 * time.Second): // a Kubernetes or MCP source syncs first
		t.Fatal("daemon not ready")
	}
	return m
}

func (m *mesh) write(name, body string) {
	m.t.Helper()
	tmp := filepath.Join(m.dir, "."+name+".tmp")
	if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
		m.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(m.dir, name)); err != nil {
		m.t.Fatal(err)
	}
}

// bootstrap is a gRPC xDS bootstrap pointing at the mesh, with Istio's
// proxyless node conventions.
func (m *mesh) bootstrap(nodeID string) []byte {
	return []byte(fmt.Sprintf(`{
  "xds_servers": [{"server_uri": %q, "channel_creds": [{"type": "insecure"}], "server_features": ["xds_v3"]}],
  "node": {"id": %q, "metadata": {"GENERATOR": "grpc", "NAMESPACE": "default"}, "locality": {"region": "r1", "zone": "z1"}},
  "server_listener_resource_name_template": "grpc/server?xds.resource.listening_address=%%s"
}`, m.d.XDSAddr(), nodeID))
}

// backend is a real gRPC server that names itself in a response header
// and can be told to fail.
type backend struct {
	name  string
	addr  string
	port  int
	mu    sync.Mutex
	calls int
	// failEvery makes every n-th call fail with UNAVAILABLE (0: never).
	failEvery int
	// failAll makes every call fail with UNAVAILABLE.
	failAll bool
	// delay is how long each call takes (a slow backend).
	delay time.Duration
}

func startBackend(t testing.TB, name string) *backend {
	t.Helper()
	b := &backend{name: name}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b.addr = lis.Addr().String()
	b.port = lis.Addr().(*net.TCPAddr).Port
	s := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		b.mu.Lock()
		b.calls++
		n := b.calls
		fail := b.failAll || (b.failEvery > 0 && n%b.failEvery != 0)
		delay := b.delay
		b.mu.Unlock()
		if delay > 0 {
			time.Sleep(delay) // the backend's work, not synchronisation
		}
		if fail {
			// No response headers: a failure with headers is "committed"
			// and gRPC never retries it.
			return nil, status.Error(codes.Unavailable, "injected failure")
		}
		_ = grpc.SetHeader(ctx, metadata.Pairs("backend", b.name))
		return h(ctx, req)
	}))
	healthpb.RegisterHealthServer(s, health.NewServer())
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	return b
}

func (b *backend) callCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.calls
}

// call makes one RPC and returns the backend that answered.
func call(ctx context.Context, cc *grpc.ClientConn, md ...string) (string, error) {
	var hdr metadata.MD
	if len(md) > 0 {
		ctx = metadata.AppendToOutgoingContext(ctx, md...)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&hdr))
	if err != nil {
		return "", err
	}
	return strings.Join(hdr.Get("backend"), ","), nil
}

// xdsClient is a grpc-go client of xds:///echo.mesh:7070 whose xDS
// client (its own, not the process-wide one) talks to the mesh as the
// proxyless sidecar pod.default; it is closed when the test ends.
func (m *mesh) xdsClient(t *testing.T, pod string) *grpc.ClientConn {
	t.Helper()
	res, err := xds.NewXDSResolverWithConfigForTesting(m.bootstrap("sidecar~127.0.0.1~" + pod + ".default~default.svc.cluster.local"))
	if err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient("xds:///echo.mesh:7070", grpc.WithResolvers(res), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

// e2eWait is how long the end-to-end tests wait for real clients to
// converge.
const e2eWait = 20 * time.Second
