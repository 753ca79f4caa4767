package load

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/baremesh/baremesh/core/identity"
	"github.com/baremesh/baremesh/internal/daemon"
	"github.com/baremesh/baremesh/internal/daemonconfig"
)

// BenchmarkConnectStormTLS is identity's connect-storm figure: one
// in-process baremeshd over BAREMESH_SCALE_SERVICES (1,000) services with
// its TLS port on, and BAREMESH_SCALE_PROXIES (2,000) SotW proxies
// connecting at once, over plaintext xDS or over the TLS port with a
// client certificate from the daemon's CA (each storm after the last one's
// proxies left), in
// the same process and run, in the order plaintext, TLS, TLS, plaintext.
// It reports the mean "all configured" time of each and their ratio
// (target ≤ 1.5). BAREMESH_STORM_STREAMS_PER_CONN sets how
// many proxy streams share a TLS connection (default 100, as the load
// client; 1 makes one TLS handshake per proxy).
func BenchmarkConnectStormTLS(b *testing.B) {
	raiseNoFile(b)
	proxies := envInt("BAREMESH_SCALE_PROXIES", 2000)
	perConn := envInt("BAREMESH_STORM_STREAMS_PER_CONN", 100)
	dir := b.TempDir()
	conf := filepath.Join(dir, "conf.d")
	if err := os.Mkdir(conf, 0o755); err != nil {
		b.Fatal(err)
	}
	for i := range envInt("BAREMESH_SCALE_SERVICES", 1000) {
		writeFile(b, conf, svcName(i)+".yaml", serviceEntry(svcName(i), svcAddrs(i)...))
	}
	cfg := daemonconfig.Defaults()
	cfg.ConfigDirs = []string{conf}
	cfg.XDSAddr, cfg.HTTPAddr, cfg.TLSAddr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	cfg.StateDir, cfg.TLSSANs = filepath.Join(dir, "state"), []string{"127.0.0.1"}
	cfg.MeshConfig = filepath.Join(dir, "no-meshconfig.yaml")
	d, err := daemon.New(cfg, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = d.Run(ctx) }()
	defer func() { cancel(); <-done }()
	select {
	case <-d.Pipeline().Ready():
	case <-time.After(2 * time.Minute):
		b.Fatal("daemon not ready")
	}
	creds := clientTLS(b, cfg.StateDir, "127.0.0.1")

	storm := func(addr string, extra ...grpc.DialOption) time.Duration {
		sctx, scancel := context.WithTimeout(ctx, 10*time.Minute)
		defer scancel()
		start := time.Now()
		f, err := Start(sctx, Options{Addr: addr, Proxies: proxies, Mode: SotW, StreamsPerConn: perConn, DialOptions: extra})
		if err != nil {
			b.Fatal(err)
		}
		defer f.Stop()
		if _, err := f.WaitConfigured(sctx); err != nil {
			b.Fatalf("%s: %v", addr, err)
		}
		return time.Since(start)
	}
	// ABBA order, so neither mode gets the warm caches of a first run.
	tlsOpt := grpc.WithTransportCredentials(creds)
	p1, s1 := storm(d.XDSAddr()), storm(d.TLSAddr(), tlsOpt)
	s2, p2 := storm(d.TLSAddr(), tlsOpt), storm(d.XDSAddr())
	plain, secure := (p1+p2)/2, (s1+s2)/2
	fmt.Fprintf(os.Stderr, "runs: plaintext %.2fs %.2fs, TLS %.2fs %.2fs\n", p1.Seconds(), p2.Seconds(), s1.Seconds(), s2.Seconds())
	b.ReportMetric(plain.Seconds(), "plaintext_configured_s")
	b.ReportMetric(secure.Seconds(), "tls_configured_s")
	b.ReportMetric(secure.Seconds()/plain.Seconds(), "tls/plaintext")
	fmt.Fprintf(os.Stderr, "connect storm, %d proxies, %d streams per connection: plaintext %.2fs, TLS %.2fs, ratio %.2f\n",
		proxies, perConn, plain.Seconds(), secure.Seconds(), secure.Seconds()/plain.Seconds())
}

// clientTLS signs a certificate for default/load with the daemon's CA (its
// files under stateDir) and returns client credentials trusting its root
// for server name; the load client's proxies are in namespace "default",
// as the identity.
func clientTLS(tb testing.TB, stateDir, server string) credentials.TransportCredentials {
	tb.Helper()
	ca, err := identity.LoadCA(identity.CAOptions{Dir: filepath.Join(stateDir, "ca")})
	if err != nil {
		tb.Fatal(err)
	}
	iss, key, err := ca.IssueWorkload(identity.ID{TrustDomain: "cluster.local", Namespace: "default", ServiceAccount: "load"}, time.Hour)
	if err != nil {
		tb.Fatal(err)
	}
	var chain [][]byte
	for _, p := range iss.Chain[:len(iss.Chain)-1] {
		blk, _ := pemDecode([]byte(p))
		chain = append(chain, blk)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.RootPEM())
	return credentials.NewTLS(&tls.Config{RootCAs: pool, ServerName: server,
		Certificates: []tls.Certificate{{Certificate: chain, PrivateKey: key}}})
}

// pemDecode returns the DER of the first PEM block in data.
func pemDecode(data []byte) ([]byte, error) {
	blk, _ := pem.Decode(data)
	if blk == nil {
		return nil, fmt.Errorf("no PEM block")
	}
	return blk.Bytes, nil
}
