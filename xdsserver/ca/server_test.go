package ca

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	pb "istio.io/api/security/v1alpha1"

	"github.com/baremesh/baremesh/core/identity"
	"github.com/baremesh/baremesh/xdsserver/tlsport"
)

const td = "cluster.local"

var vm = identity.ID{TrustDomain: td, Namespace: "bar", ServiceAccount: "vm-sa"}

type env struct {
	t      *testing.T
	ca     *identity.CA
	tokens *identity.TokenStore
	srv    *Server
	reg    *prometheus.Registry
	addr   string
}

// newEnv serves the CA service on a loopback TLS listener, as baremeshd does.
func newEnv(t *testing.T) *env {
	t.Helper()
	ca, err := identity.LoadCA(identity.CAOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, ca: ca, tokens: &identity.TokenStore{Dir: t.TempDir()}, reg: prometheus.NewRegistry()}
	tdf := func() string { return td }
	e.srv = New(Options{CA: ca, TrustDomain: tdf, Registerer: e.reg,
		Authenticator: identity.Chain{&identity.CertAuthenticator{CA: ca}, &identity.TokenAuthenticator{Store: e.tokens, TrustDomain: tdf}}})
	tlsCfg, err := tlsport.ServerTLS(ca, []string{"istiod.istio-system.svc", "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(grpc.Creds(tlsport.ServerCredentials(tlsCfg)))
	e.srv.Register(g)
	go g.Serve(lis)
	t.Cleanup(g.Stop)
	e.addr = lis.Addr().String()
	return e
}

// client dials as Istio's agent does: server name istiod.istio-system.svc,
// the mesh root, optionally a client certificate.
func (e *env) client(cert *tls.Certificate) pb.IstioCertificateServiceClient {
	e.t.Helper()
	cfg := &tls.Config{RootCAs: e.ca.Roots(), ServerName: "istiod.istio-system.svc"}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	conn, err := grpc.NewClient(e.addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { conn.Close() })
	return pb.NewIstioCertificateServiceClient(conn)
}

func (e *env) token(spec identity.TokenSpec) string {
	e.t.Helper()
	tok, _, err := e.tokens.Create(spec)
	if err != nil {
		e.t.Fatal(err)
	}
	return tok
}

func bearer(tok string) context.Context {
	return metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+tok)
}

func csr(t *testing.T, key crypto.Signer, id string) string {
	t.Helper()
	u, _ := url.Parse(id)
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{URIs: []*url.URL{u}}, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}))
}

func key(t *testing.T) *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// issue asks for vm's certificate and returns it as a TLS certificate,
// after checking the chain against the root.
func (e *env) issue(ctx context.Context, c pb.IstioCertificateServiceClient) *tls.Certificate {
	e.t.Helper()
	k := key(e.t)
	resp, err := c.CreateCertificate(ctx, &pb.IstioCertificateRequest{Csr: csr(e.t, k, vm.String()), ValidityDuration: 3600})
	if err != nil {
		e.t.Fatalf("CreateCertificate: %v", err)
	}
	chain := resp.GetCertChain()
	if len(chain) != 2 || chain[1] != string(e.ca.RootPEM()) {
		e.t.Fatalf("chain: want leaf, root; got %d elements", len(chain))
	}
	leaf, err := x509.ParseCertificate(pemDER(chain[0]))
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: e.ca.Roots(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		e.t.Fatal(err)
	}
	if leaf.URIs[0].String() != vm.String() || time.Until(leaf.NotAfter) > time.Hour {
		e.t.Fatalf("leaf %v until %v", leaf.URIs, leaf.NotAfter)
	}
	return &tls.Certificate{Certificate: [][]byte{leaf.Raw}, PrivateKey: k, Leaf: leaf}
}

func TestCreateCertificate(t *testing.T) {
	e := newEnv(t)
	anon := e.client(nil)
	tok := e.token(identity.TokenSpec{Namespace: "bar", ServiceAccount: "vm-sa", Group: "foo", TTL: time.Hour, MaxUses: 1})
	cert := e.issue(bearer(tok), anon)

	// Renewal: the token is spent; the certificate alone is the identity.
	renewed := e.issue(context.Background(), e.client(cert))
	if renewed.Leaf.SerialNumber.Cmp(cert.Leaf.SerialNumber) == 0 {
		t.Fatal("renewal returned the same certificate")
	}
	if got := e.metric("baremesh_ca_certs_issued_total", "token"); got != 1 {
		t.Fatalf("issued{token} = %v", got)
	}
	if got := e.metric("baremesh_ca_certs_issued_total", "client-cert"); got != 1 {
		t.Fatalf("issued{client-cert} = %v", got)
	}
	if got := e.metric("baremesh_ca_token_uses_total", ""); got != 1 {
		t.Fatalf("token uses = %v", got)
	}

	rec := httptest.NewRecorder()
	e.srv.CertzHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/debug/certz", nil))
	var certz struct{ Issued []Record }
	if err := json.Unmarshal(rec.Body.Bytes(), &certz); err != nil || len(certz.Issued) != 2 {
		t.Fatalf("certz: %s (%v)", rec.Body, err)
	}
	if c := certz.Issued[1]; c.Identity != vm.String() || c.Method != "token" || c.Group != "foo" || c.Serial != cert.Leaf.SerialNumber.Text(16) {
		t.Fatalf("certz oldest: %+v", c)
	}
	if c := certz.Issued[0]; c.Method != "client-cert" || c.With != cert.Leaf.SerialNumber.Text(16) {
		t.Fatalf("certz newest: %+v", c)
	}
}

// Each bad request is refused with its code and reason, counted, and the
// server keeps issuing to good callers afterwards.
func TestCreateCertificateRefusals(t *testing.T) {
	e := newEnv(t)
	anon := e.client(nil)
	spec := identity.TokenSpec{Namespace: "bar", ServiceAccount: "vm-sa", TTL: time.Hour}
	good := e.token(spec)
	revoked := e.token(spec)
	list, _ := e.tokens.List()
	if _, err := e.tokens.Revoke(list[1].ID); err != nil {
		t.Fatal(err)
	}
	once := e.token(identity.TokenSpec{Namespace: "bar", ServiceAccount: "vm-sa", TTL: time.Hour, MaxUses: 1})
	e.issue(bearer(once), anon)
	expired := func() string {
		s := &identity.TokenStore{Dir: e.tokens.Dir, Now: func() time.Time { return time.Now().Add(-2 * time.Hour) }}
		tok, _, err := s.Create(spec)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}()
	otherNS := e.token(identity.TokenSpec{Namespace: "other", ServiceAccount: "vm-sa", TTL: time.Hour})
	otherCA := func() *tls.Certificate {
		ca, err := identity.LoadCA(identity.CAOptions{Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		k := key(t)
		c, id, _ := identity.ParseCSR([]byte(csr(t, k, vm.String())))
		is, err := ca.SignWorkload(c, id, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return &tls.Certificate{Certificate: [][]byte{is.Cert.Raw}, PrivateKey: k}
	}()
	good2 := e.token(spec)
	vmCSR := csr(t, key(t), vm.String())
	p521, _ := ecdsa.GenerateKey(elliptic.P521(), rand.Reader)

	cases := []struct {
		name   string
		client pb.IstioCertificateServiceClient
		ctx    context.Context
		csr    string
		code   codes.Code
		reason string
	}{
		{"no token", anon, context.Background(), vmCSR, codes.Unauthenticated, "no_credentials"},
		{"malformed token", anon, bearer("garbage"), vmCSR, codes.Unauthenticated, "token_malformed"},
		{"bad secret", anon, bearer(good[:len(good)-3] + "AAA"), vmCSR, codes.Unauthenticated, "token_bad_secret"},
		{"unknown token", anon, bearer("bmt1.0123456789abcdef" + good[strings.LastIndex(good, "."):]), vmCSR, codes.Unauthenticated, "token_unknown"},
		{"expired token", anon, bearer(expired), vmCSR, codes.Unauthenticated, "token_expired"},
		{"revoked token", anon, bearer(revoked), vmCSR, codes.Unauthenticated, "token_revoked"},
		{"used-up token", anon, bearer(once), vmCSR, codes.Unauthenticated, "token_used_up"},
		{"client cert from another CA", e.client(otherCA), context.Background(), vmCSR, codes.Unauthenticated, "cert_untrusted"},
		{"CSR for another namespace", anon, bearer(otherNS), vmCSR, codes.PermissionDenied, "identity_mismatch"},
		{"CSR for another service account", anon, bearer(good2), csr(t, key(t), "spiffe://cluster.local/ns/bar/sa/admin"), codes.PermissionDenied, "identity_mismatch"},
		{"CSR for another trust domain", anon, bearer(good2), csr(t, key(t), "spiffe://evil.org/ns/bar/sa/vm-sa"), codes.PermissionDenied, "identity_mismatch"},
		{"garbage CSR", anon, bearer(good), "garbage", codes.InvalidArgument, "csr_invalid"},
		{"1 MB of garbage", anon, bearer(good), strings.Repeat("A", 1<<20), codes.InvalidArgument, "csr_too_large"},
		{"unsupported key", anon, bearer(good), csr(t, p521, vm.String()), codes.InvalidArgument, "csr_key_unsupported"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.client.CreateCertificate(c.ctx, &pb.IstioCertificateRequest{Csr: c.csr})
			st := status.Convert(err)
			if st.Code() != c.code || !strings.HasPrefix(st.Message(), c.reason+":") {
				t.Fatalf("got %v %q, want %v %s", st.Code(), st.Message(), c.code, c.reason)
			}
			if got := e.metric("baremesh_ca_requests_refused_total", c.reason); got < 1 {
				t.Fatalf("refused{%s} = %v", c.reason, got)
			}
		})
	}
	// A token is spent only by a request whose CSR was well formed.
	if l, _ := e.tokens.List(); l[0].Uses != 0 {
		t.Fatalf("good token spent %d times by refused requests", l[0].Uses)
	}
	e.issue(bearer(good), anon)
	if n := len(e.srv.Certz()); n != 2 {
		t.Fatalf("certz: %d issued, want 2", n)
	}
}

func TestTTL(t *testing.T) {
	e := newEnv(t)
	e.srv.opts.DefaultTTL, e.srv.opts.MaxTTL = 2*time.Hour, 3*time.Hour
	tok := e.token(identity.TokenSpec{Namespace: "bar", ServiceAccount: "vm-sa", TTL: time.Hour})
	for _, c := range []struct {
		ask  int64
		want time.Duration
	}{{0, 2 * time.Hour}, {60, time.Minute}, {100 * 3600, 3 * time.Hour}} {
		resp, err := e.client(nil).CreateCertificate(bearer(tok), &pb.IstioCertificateRequest{Csr: csr(t, key(t), vm.String()), ValidityDuration: c.ask})
		if err != nil {
			t.Fatal(err)
		}
		leaf, _ := x509.ParseCertificate(pemDER(resp.CertChain[0]))
		if d := time.Until(leaf.NotAfter); d > c.want || d < c.want-time.Minute {
			t.Errorf("asked %ds: valid for %v, want %v", c.ask, d, c.want)
		}
	}
}

// metric reads a counter from the registry (label: its one label's value,
// or "" for none).
func (e *env) metric(name, label string) float64 {
	e.t.Helper()
	fams, err := e.reg.Gather()
	if err != nil {
		e.t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if len(m.GetLabel()) == 0 && label == "" || len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == label {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// pemDER is the DER of a PEM block (nil if p holds none).
func pemDER(p string) []byte {
	b, _ := pem.Decode([]byte(p))
	if b == nil {
		return nil
	}
	return b.Bytes
}
