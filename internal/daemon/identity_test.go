package daemon

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	pb "istio.io/api/security/v1alpha1"

	"github.com/baremesh/baremesh/core/identity"
	"github.com/baremesh/baremesh/internal/daemonconfig"
)

func identityConfig(t *testing.T) daemonconfig.Config {
	cfg := daemonconfig.Defaults()
	cfg.ConfigDirs = []string{t.TempDir()}
	cfg.XDSAddr, cfg.HTTPAddr, cfg.TLSAddr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	cfg.MeshConfig = filepath.Join(t.TempDir(), "absent.yaml")
	cfg.StateDir = t.TempDir()
	return cfg
}

func TestTLSPortServesCA(t *testing.T) {
	cfg := identityConfig(t)
	dir := cfg.ConfigDirs[0]
	d, _ := startDaemon(t, dir) // the tlsAddr-less default: no CA, no TLS port
	if d.TLSAddr() != "" {
		t.Fatalf("tlsAddr unset: TLS port %s is open", d.TLSAddr())
	}
	d = runDaemon(t, cfg)
	root, err := os.ReadFile(filepath.Join(cfg.StateDir, "ca", identity.RootCertFile))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(root) {
		t.Fatal("root-cert.pem holds no certificate")
	}
	// The server certificate verifies for the name Istio's agent checks.
	conn, err := grpc.NewClient(d.TLSAddr(), grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: roots, ServerName: "istiod.istio-system.svc"})))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// The caller is checked before its request is read (issue #24).
	_, err = pb.NewIstioCertificateServiceClient(conn).CreateCertificate(t.Context(), &pb.IstioCertificateRequest{Csr: "x"})
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("CreateCertificate: %v", err)
	}
	if code, body := get(t, "http://"+d.HTTPAddr()+"/metrics"); code != 200 || !strings.Contains(body, `baremesh_ca_requests_refused_total{reason="no_credentials"} 1`) {
		t.Fatalf("metrics: %d", code)
	}
	if code, body := get(t, "http://"+d.HTTPAddr()+"/debug/certz"); code != 200 || !strings.Contains(body, `"issued"`) {
		t.Fatalf("certz: %d %s", code, body)
	}
}

func TestBadCADirIsAStartupError(t *testing.T) {
	cfg := identityConfig(t)
	caDir := filepath.Join(cfg.StateDir, "ca")
	if _, err := identity.LoadCA(identity.CAOptions{Dir: caDir}); err != nil {
		t.Fatal(err)
	}
	other, err := identity.LoadCA(identity.CAOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	// A key that does not match its certificate.
	if err := os.WriteFile(filepath.Join(caDir, identity.CACertFile), other.RootPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := New(cfg, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "ca-key.pem does not match ca-cert.pem") {
		t.Fatalf("New: %v", err)
	}
	if _, _, err := CheckConfig([]string{"--config-dir", cfg.ConfigDirs[0], "--tls-addr", "127.0.0.1:0", "--state-dir", cfg.StateDir,
		"--mesh-config", cfg.MeshConfig}); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Fatalf("check-config: %v", err)
	}
	fresh := t.TempDir()
	if _, _, err := CheckConfig([]string{"--config-dir", cfg.ConfigDirs[0], "--tls-addr", "127.0.0.1:0", "--state-dir", fresh,
		"--mesh-config", cfg.MeshConfig}); err != nil {
		t.Fatalf("check-config before the first start: %v", err)
	}
	if _, err := os.Stat(filepath.Join(fresh, "ca")); err == nil {
		t.Fatal("check-config created a CA")
	}
	// Plugged-in cacerts that are not there.
	cfg.CACertsDir = filepath.Join(t.TempDir(), "cacerts")
	if _, err := New(cfg, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "Istio cacerts layout wants") {
		t.Fatalf("New with missing cacerts: %v", err)
	}
}

// runDaemon runs a daemon from cfg until the test ends.
func runDaemon(t *testing.T, cfg daemonconfig.Config) *Daemon {
	t.Helper()
	d, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("daemon did not stop within 10s of cancel")
		}
	})
	return d
}
