package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	pb "istio.io/api/security/v1alpha1"
)

// TestRootRotationWithPilotAgent rotates the CA's root under two running
// Istio pilot-agents (VMs A and B, bootstrapped with `baremeshctl vm
// bootstrap`, certificates of 30 s renewed at about 15 s) while a grpc-go
// client with B's files calls a grpc-go server with A's files over mTLS,
// a new connection (handshake) every 100 ms, each side re-reading its
// agent's files as a workload does. Through `baremeshctl ca rotate
// prepare`, activate, the renewals and retire, no call may fail; the
// steps refuse while certificates are outstanding; a proxy offline for
// the whole rotation is refused with what to do.
func TestRootRotationWithPilotAgent(t *testing.T) {
	bin := pilotAgent(t)
	cfgFile, d := startCADaemon(t, "")
	daemonURL := "http://" + d.HTTPAddr()
	start := time.Now()
	var timeline []string
	note := func(format string, args ...any) {
		s := fmt.Sprintf("%6.1fs  ", time.Since(start).Seconds()) + fmt.Sprintf(format, args...)
		timeline = append(timeline, s)
		t.Log(s)
	}
	a, b := bootstrapVM(t, d, cfgFile, 30*time.Second), bootstrapVM(t, d, cfgFile, 30*time.Second)
	a.start(t, bin)
	b.start(t, bin)
	waitFor(t, 60*time.Second, "both agents' first certificates", func() bool {
		_, ra := a.holds()
		_, rb := b.holds()
		return ra != "" && rb != ""
	})
	bundle, oldRoot := a.holds()
	note("agents A and B hold certificates from root %s, bundle %v", oldRoot, bundle)
	// VM C joins now and goes away, holding a certificate of an hour (as
	// an agent with SECRET_TTL=1h would), bought with its join token.
	c := bootstrapVM(t, d, cfgFile, time.Hour)
	offlineRoot, _ := os.ReadFile(filepath.Join(c.certs, "root-cert.pem"))
	token, _ := os.ReadFile(filepath.Join(c.dir, "var/run/secrets/tokens/istio-token"))
	resp, offlineKey, err := createWith(t, d.TLSAddr(), offlineRoot, nil, nil, string(token), time.Hour)
	must(t, err)
	offlineChain := []byte(strings.Join(resp.GetCertChain()[:len(resp.GetCertChain())-1], ""))
	offlineSerial := pemCerts(offlineChain)[0].SerialNumber.Text(16)
	note("VM C got certificate %s (1 h) and went offline", offlineSerial)

	calls := startMTLSCalls(t, a, b)
	waitFor(t, 10*time.Second, "the first mTLS calls", func() bool { return calls.stats().ok >= 3 })
	note("mTLS calls B -> A flowing")

	rc, out, errOut := runCtl("ca", "rotate", "prepare", "--config", cfgFile, "--daemon", daemonURL)
	if rc != 0 {
		t.Fatalf("ca rotate prepare: %d\n%s%s", rc, out, errOut)
	}
	note("ca rotate prepare: %s", strings.TrimSpace(out))
	var newRoot string
	caRoots, _ := os.ReadFile(filepath.Join(filepath.Dir(cfgFile), "state", "ca", "root-cert.pem"))
	for _, c := range pemCerts(caRoots) {
		if fingerprint(c) != oldRoot {
			newRoot = fingerprint(c)
		}
	}
	// vm bootstrap during the overlap hands out both roots.
	late := bootstrapVM(t, d, cfgFile, time.Minute)
	if root, _ := os.ReadFile(filepath.Join(late.certs, "root-cert.pem")); len(pemCerts(root)) != 2 || newRoot == "" {
		t.Fatalf("vm bootstrap during the overlap: root-cert.pem holds %d roots, want 2", len(pemCerts(root)))
	}
	rc, _, errOut = runCtl("ca", "rotate", "activate", "--config", cfgFile, "--daemon", daemonURL)
	if rc != 1 || !strings.Contains(errOut, "3 certificate(s) issued with a trust bundle without the new root") || !strings.Contains(errOut, offlineSerial) {
		t.Fatalf("activate before the agents renewed: rc %d, %s", rc, errOut)
	}
	note("ca rotate activate refused (rc 1): %s", firstLine(errOut))

	both := []string{oldRoot, newRoot}
	waitFor(t, 60*time.Second, "both agents' bundles to hold both roots", func() bool {
		ba, _ := a.holds()
		bb, _ := b.holds()
		return sameSet(ba, both) && sameSet(bb, both)
	})
	_, ra := a.holds()
	_, rb := b.holds()
	note("renewed: A and B trust %v; their certificates are from %s and %s (old)", both, ra, rb)

	// Only C is outstanding now: the operator knows it is gone.
	rc, _, errOut = runCtl("ca", "rotate", "activate", "--config", cfgFile, "--daemon", daemonURL)
	if rc != 1 || !strings.Contains(errOut, "1 certificate(s)") || !strings.Contains(errOut, offlineSerial) {
		t.Fatalf("activate with only C outstanding: rc %d, %s", rc, errOut)
	}
	note("ca rotate activate refused (rc 1), naming only C's certificate: %s", strings.Split(errOut, "\n")[1])
	rc, out, errOut = runCtl("ca", "rotate", "activate", "--force", "--config", cfgFile, "--daemon", daemonURL)
	if rc != 0 {
		t.Fatalf("ca rotate activate --force: %d\n%s%s", rc, out, errOut)
	}
	note("ca rotate activate --force: %s", strings.TrimSpace(out))
	rc, _, errOut = runCtl("ca", "rotate", "retire", "--config", cfgFile, "--daemon", daemonURL)
	if rc != 1 || !strings.Contains(errOut, "signed by the old root") {
		t.Fatalf("retire before the agents renewed: rc %d, %s", rc, errOut)
	}
	note("ca rotate retire refused (rc 1): %s", firstLine(errOut))

	waitFor(t, 60*time.Second, "both agents' certificates from the new root", func() bool {
		_, ra := a.holds()
		_, rb := b.holds()
		return ra == newRoot && rb == newRoot
	})
	note("renewed: A's and B's certificates are from the new root %s; both still trust %v", newRoot, both)

	rc, _, errOut = runCtl("ca", "rotate", "retire", "--config", cfgFile, "--daemon", daemonURL)
	if rc != 1 || !strings.Contains(errOut, "1 certificate(s)") || !strings.Contains(errOut, offlineSerial) {
		t.Fatalf("retire with only C outstanding: rc %d, %s", rc, errOut)
	}
	note("ca rotate retire refused (rc 1), naming only C's certificate: %s", strings.Split(errOut, "\n")[1])
	rc, out, errOut = runCtl("ca", "rotate", "retire", "--force", "--config", cfgFile, "--daemon", daemonURL)
	if rc != 0 {
		t.Fatalf("ca rotate retire --force: %d\n%s%s", rc, out, errOut)
	}
	note("ca rotate retire --force: %s", strings.TrimSpace(out))
	waitFor(t, 60*time.Second, "both agents' bundles to hold the new root only", func() bool {
		ba, _ := a.holds()
		bb, _ := b.holds()
		return sameSet(ba, []string{newRoot}) && sameSet(bb, []string{newRoot})
	})
	note("renewed: A and B trust only %s", newRoot)
	n := calls.stats().ok
	waitFor(t, 10*time.Second, "more calls after the last renewal", func() bool { return calls.stats().ok >= n+5 })
	st := calls.stop()
	note("mTLS calls: %d ok, %d failed; client cert root -> server cert root: %v", st.ok, len(st.failed), st.pairs)
	if len(st.failed) > 0 {
		t.Errorf("%d mTLS calls failed during the rotation, first: %v", len(st.failed), st.failed[0])
	}

	// A VM that was offline through the whole rotation: with its old
	// root-cert.pem it cannot even verify the CA (the port's certificate
	// is from the new root); given the new root, its certificate is
	// refused by name.
	_, _, err = createWith(t, d.TLSAddr(), offlineRoot, offlineChain, offlineKey, "", 0)
	note("offline VM, old root-cert.pem: %v", err)
	if err == nil || !strings.Contains(err.Error(), "certificate signed by unknown authority") {
		t.Errorf("offline VM with the old root: %v", err)
	}
	newRootPEM, _ := os.ReadFile(filepath.Join(a.certs, "root-cert.pem"))
	_, _, err = createWith(t, d.TLSAddr(), newRootPEM, offlineChain, offlineKey, "", 0)
	note("offline VM, new root-cert.pem, old certificate: %v", err)
	if s := status.Convert(err); s.Code() != codes.Unauthenticated || !strings.Contains(s.Message(), "cert_retired_root") || !strings.Contains(s.Message(), "re-bootstrap") {
		t.Errorf("offline VM's old certificate: %v", err)
	}
	t.Logf("timeline:\n%s", strings.Join(timeline, "\n"))
}

// createWith asks the CA for a certificate of ttl (0: the default) over
// TLS trusting rootPEM, presenting chain/key or a join token; it returns
// the new key too.
func createWith(t *testing.T, addr string, rootPEM, chain, key []byte, token string, ttl time.Duration) (*pb.IstioCertificateResponse, []byte, error) {
	t.Helper()
	cfg := &tls.Config{RootCAs: x509.NewCertPool(), ServerName: "istiod.istio-system.svc", MinVersion: tls.VersionTLS12}
	cfg.RootCAs.AppendCertsFromPEM(rootPEM)
	if chain != nil {
		pair, err := tls.X509KeyPair(chain, key)
		must(t, err)
		cfg.Certificates = []tls.Certificate{pair}
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	must(t, err)
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+strings.TrimSpace(token))
	}
	csr, newKey := csrPEM(t)
	resp, err := pb.NewIstioCertificateServiceClient(conn).CreateCertificate(ctx, &pb.IstioCertificateRequest{Csr: csr, ValidityDuration: int64(ttl / time.Second)})
	return resp, newKey, err
}

// fileIdentity is a workload's certificate, key and trust bundle read from
// its agent's OUTPUT_CERTS at every handshake, keeping the last good set
// while the agent rewrites them (as a workload reading files does).
type fileIdentity struct {
	dir  string
	mu   sync.Mutex
	cert *tls.Certificate
	pool *x509.CertPool
}

func (f *fileIdentity) load() (*tls.Certificate, *x509.CertPool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c, err := tls.LoadX509KeyPair(filepath.Join(f.dir, "cert-chain.pem"), filepath.Join(f.dir, "key.pem")); err == nil {
		f.cert = &c
	}
	if data, err := os.ReadFile(filepath.Join(f.dir, "root-cert.pem")); err == nil {
		p := x509.NewCertPool()
		if p.AppendCertsFromPEM(data) {
			f.pool = p
		}
	}
	return f.cert, f.pool
}

// verifySPIFFE checks a peer's chain against pool and its identity, as
// Istio's SPIFFE verification does (no host name: the certificates carry
// only a URI SAN); root receives the fingerprint of the root it chains to.
func verifySPIFFE(pool *x509.CertPool, root *string) func([][]byte, [][]*x509.Certificate) error {
	return func(raw [][]byte, _ [][]*x509.Certificate) error {
		var certs []*x509.Certificate
		for _, r := range raw {
			c, err := x509.ParseCertificate(r)
			if err != nil {
				return err
			}
			certs = append(certs, c)
		}
		if len(certs) == 0 {
			return errors.New("no peer certificate")
		}
		inter := x509.NewCertPool()
		for _, c := range certs[1:] {
			inter.AddCert(c)
		}
		chains, err := certs[0].Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
		if err != nil {
			return err
		}
		if len(certs[0].URIs) != 1 || certs[0].URIs[0].String() != "spiffe://cluster.local/ns/bookinfo/sa/reviews" {
			return fmt.Errorf("peer identity %v", certs[0].URIs)
		}
		*root = fingerprint(chains[0][len(chains[0])-1])
		return nil
	}
}

type callStats struct {
	ok     int
	failed []error
	pairs  map[string]int // "client cert root -> server cert root": calls
}

type mtlsCalls struct {
	mu    sync.Mutex
	st    callStats
	done  chan struct{}
	wg    sync.WaitGroup
	srv   *grpc.Server
	serve chan struct{}
}

func (m *mtlsCalls) stats() callStats {
	m.mu.Lock()
	defer m.mu.Unlock()
	return callStats{ok: m.st.ok, failed: slices.Clone(m.st.failed)}
}

func (m *mtlsCalls) stop() callStats {
	select {
	case <-m.done:
	default:
		close(m.done)
	}
	m.wg.Wait()
	m.srv.Stop()
	<-m.serve
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.st
}

// startMTLSCalls serves gRPC health with server's files and calls it with
// client's, a new connection every 100 ms, until stop.
func startMTLSCalls(t *testing.T, server, client *agentVM) *mtlsCalls {
	t.Helper()
	sid, cid := &fileIdentity{dir: server.certs}, &fileIdentity{dir: client.certs}
	var clientRoot string // the root the last client certificate chained to (server side)
	var rootMu sync.Mutex
	creds := credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			cert, pool := sid.load()
			return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{*cert}, ClientAuth: tls.RequireAnyClientCert,
				VerifyPeerCertificate: func(raw [][]byte, v [][]*x509.Certificate) error {
					var r string
					err := verifySPIFFE(pool, &r)(raw, v)
					rootMu.Lock()
					clientRoot = r
					rootMu.Unlock()
					return err
				}}, nil
		}})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	m := &mtlsCalls{done: make(chan struct{}), srv: grpc.NewServer(grpc.Creds(creds)), serve: make(chan struct{}), st: callStats{pairs: map[string]int{}}}
	healthpb.RegisterHealthServer(m.srv, health.NewServer())
	go func() { defer close(m.serve); _ = m.srv.Serve(lis) }()
	t.Cleanup(func() { m.stop() })
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-m.done:
				return
			case <-tick.C:
			}
			cert, pool := cid.load()
			var serverRoot string
			conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
				MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{*cert},
				InsecureSkipVerify:    true, // verified by VerifyPeerCertificate: SPIFFE identity, no host name
				VerifyPeerCertificate: verifySPIFFE(pool, &serverRoot)})))
			if err == nil {
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
				cancel()
				conn.Close()
			}
			rootMu.Lock()
			pair := clientRoot + " -> " + serverRoot
			rootMu.Unlock()
			m.mu.Lock()
			if err != nil {
				m.st.failed = append(m.st.failed, fmt.Errorf("%s: %w", time.Now().Format(time.TimeOnly), err))
			} else {
				m.st.ok++
				m.st.pairs[pair]++
			}
			m.mu.Unlock()
		}
	}()
	return m
}

func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return l
}
