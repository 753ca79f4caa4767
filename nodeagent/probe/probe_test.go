package probe

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/baremesh/baremesh/core/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m.Run) }

// flips runs spec and returns its reports as they come.
func flips(t *testing.T, spec Spec) <-chan bool {
	t.Helper()
	if err := spec.Validate(); err != nil {
		t.Fatal(err)
	}
	out := make(chan bool, 10)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); spec.Run(ctx, func(h bool, _ string) { out <- h }) }()
	t.Cleanup(func() { cancel(); <-done })
	return out
}

func next(t *testing.T, ch <-chan bool, want bool) {
	t.Helper()
	select {
	case got := <-ch:
		if got != want {
			t.Fatalf("report healthy=%v, want %v", got, want)
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("no report (want healthy=%v) within 15 s", want)
	}
}

// TestProbesFlip: each kind of probe against a real target turns
// healthy, unhealthy once the target fails (after failureThreshold
// failures), and healthy again (after successThreshold successes).
func TestProbesFlip(t *testing.T) {
	t.Run("httpGet", func(t *testing.T) {
		t.Parallel()
		var up atomic.Bool
		up.Store(true)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !up.Load() || r.Host != "app.example" {
				w.WriteHeader(http.StatusInternalServerError)
			}
		}))
		defer srv.Close()
		port, _ := strconv.Atoi(srv.URL[strings.LastIndexByte(srv.URL, ':')+1:])
		ch := flips(t, Spec{HTTPGet: &HTTPGet{Port: port, Path: "healthz", HTTPHeaders: []HTTPHeader{{Name: "Host", Value: "app.example"}}},
			PeriodSeconds: 1, FailureThreshold: 2, SuccessThreshold: 2})
		next(t, ch, true)
		up.Store(false)
		next(t, ch, false)
		up.Store(true)
		next(t, ch, true)
	})
	t.Run("tcpSocket", func(t *testing.T) {
		t.Parallel()
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := lis.Addr().String()
		port := lis.Addr().(*net.TCPAddr).Port
		go func() {
			for {
				c, err := lis.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
		ch := flips(t, Spec{TCPSocket: &TCPSocket{Port: port}, PeriodSeconds: 1, FailureThreshold: 1})
		next(t, ch, true)
		lis.Close()
		next(t, ch, false)
		lis2, err := net.Listen("tcp", addr)
		if err != nil {
			t.Skipf("port %d not free again: %v", port, err)
		}
		defer lis2.Close()
		go func() {
			for {
				c, err := lis2.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
		next(t, ch, true)
	})
	t.Run("exec", func(t *testing.T) {
		t.Parallel()
		flag := filepath.Join(t.TempDir(), "ready")
		if err := os.WriteFile(flag, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		ch := flips(t, Spec{Exec: &Exec{Command: []string{"test", "-e", flag}}, PeriodSeconds: 1, FailureThreshold: 1})
		next(t, ch, true)
		os.Remove(flag)
		next(t, ch, false)
		_ = os.WriteFile(flag, nil, 0o600)
		next(t, ch, true)
	})
	t.Run("grpc", func(t *testing.T) {
		t.Parallel()
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		g := grpc.NewServer()
		hs := health.NewServer()
		healthpb.RegisterHealthServer(g, hs)
		go func() { _ = g.Serve(lis) }()
		defer g.Stop()
		hs.SetServingStatus("echo", healthpb.HealthCheckResponse_SERVING)
		ch := flips(t, Spec{GRPC: &GRPC{Port: lis.Addr().(*net.TCPAddr).Port, Service: "echo"}, PeriodSeconds: 1, FailureThreshold: 1})
		next(t, ch, true)
		hs.SetServingStatus("echo", healthpb.HealthCheckResponse_NOT_SERVING)
		next(t, ch, false)
		hs.SetServingStatus("echo", healthpb.HealthCheckResponse_SERVING)
		next(t, ch, true)
	})
}

// TestValidate: a probe names exactly one check and sane numbers.
func TestValidate(t *testing.T) {
	for _, s := range []Spec{
		{},
		{HTTPGet: &HTTPGet{Port: 80}, TCPSocket: &TCPSocket{Port: 80}},
		{HTTPGet: &HTTPGet{Port: 0}},
		{HTTPGet: &HTTPGet{Port: 80, Scheme: "FTP"}},
		{Exec: &Exec{}},
		{GRPC: &GRPC{Port: 70000}},
		{TCPSocket: &TCPSocket{Port: 80}, PeriodSeconds: -1},
	} {
		if err := s.Validate(); err == nil {
			t.Errorf("%+v accepted", s)
		}
	}
	s := Spec{TCPSocket: &TCPSocket{Port: 80}}
	if err := s.Validate(); err != nil || s.PeriodSeconds != 10 || s.TimeoutSeconds != 1 || s.SuccessThreshold != 1 || s.FailureThreshold != 3 {
		t.Errorf("defaults: %+v, %v", s, err)
	}
}
