package identity

import (
	"context"
	"crypto/x509"
	"errors"
	"testing"
	"time"
)

func TestCertAuthenticator(t *testing.T) {
	ca, err := LoadCA(CAOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	other, err := LoadCA(CAOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	leaf := func(ca *CA, ttl time.Duration) []*x509.Certificate {
		csr, id, err := ParseCSR(csrFor(t, newKey(t), workload.String()))
		if err != nil {
			t.Fatal(err)
		}
		is, err := ca.SignWorkload(csr, id, ttl)
		if err != nil {
			t.Fatal(err)
		}
		return []*x509.Certificate{is.Cert}
	}
	server, _, err := ca.SignServer([]string{"istiod.istio-system.svc"}, nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	a := &CertAuthenticator{CA: ca}
	good := leaf(ca, time.Hour)
	caller, err := a.Authenticate(context.Background(), Credentials{PeerCertificates: good})
	if err != nil || caller.ID != workload || caller.Method != MethodClientCert || caller.Detail != good[0].SerialNumber.Text(16) {
		t.Fatalf("good cert: %+v, %v", caller, err)
	}
	later := &CertAuthenticator{CA: ca, Now: func() time.Time { return time.Now().Add(2 * time.Hour) }}
	for _, c := range []struct {
		name  string
		a     *CertAuthenticator
		certs []*x509.Certificate
		want  error
	}{
		{"none", a, nil, ErrNoCredentials},
		{"other CA", a, leaf(other, time.Hour), ErrCertUntrusted},
		{"expired", later, good, ErrCertExpired},
		{"no SPIFFE ID", a, []*x509.Certificate{server.Cert}, ErrCertNoIdentity},
	} {
		if _, err := c.a.Authenticate(context.Background(), Credentials{PeerCertificates: c.certs}); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}

func TestChain(t *testing.T) {
	ca, err := LoadCA(CAOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	s := &TokenStore{Dir: t.TempDir()}
	tok, _, err := s.Create(TokenSpec{Namespace: "bar", ServiceAccount: "vm-sa", TTL: time.Hour, MaxUses: 1})
	if err != nil {
		t.Fatal(err)
	}
	chain := Chain{&CertAuthenticator{CA: ca}, &TokenAuthenticator{Store: s, TrustDomain: func() string { return "cluster.local" }}}
	if _, err := chain.Authenticate(context.Background(), Credentials{}); !errors.Is(err, ErrNoCredentials) || Reason(err) != "no_credentials" {
		t.Fatalf("nothing: %v", err)
	}
	caller, err := chain.Authenticate(context.Background(), Credentials{BearerToken: tok})
	if err != nil || caller.Method != MethodToken {
		t.Fatalf("token: %+v, %v", caller, err)
	}
	csr, id, _ := ParseCSR(csrFor(t, newKey(t), workload.String()))
	is, _ := ca.SignWorkload(csr, id, time.Hour)
	// The token is used up, but the certificate authenticates first and
	// spends nothing: renewal after onboarding.
	caller, err = chain.Authenticate(context.Background(), Credentials{BearerToken: tok, PeerCertificates: []*x509.Certificate{is.Cert}})
	if err != nil || caller.Method != MethodClientCert {
		t.Fatalf("cert with spent token: %+v, %v", caller, err)
	}
	_, err = chain.Authenticate(context.Background(), Credentials{BearerToken: tok})
	if !errors.Is(err, ErrTokenUsedUp) || Reason(err) != "token_used_up" || !IsAuthError(err) {
		t.Fatalf("spent token alone: %v (%s)", err, Reason(err))
	}
}

func TestLooksLikeJWT(t *testing.T) {
	for tok, want := range map[string]bool{
		"eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln":                         true,
		"bmt1.0123456789abcdef.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA": false, // a join token
		"a.b.c":                  false, // three parts, no JSON header
		"eyJhbGciOiJSUzI1NiJ9..": false,
		"":                       false,
	} {
		if got := LooksLikeJWT(tok); got != want {
			t.Errorf("LooksLikeJWT(%q) = %v, want %v", tok, got, want)
		}
	}
}

// TestCertAuthenticatorRemembers: a verified chain is answered from
// memory on the next stream, but never past its expiry.
func TestCertAuthenticatorRemembers(t *testing.T) {
	ca, err := LoadCA(CAOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	iss, _, err := ca.IssueWorkload(ID{TrustDomain: "cluster.local", Namespace: "ns", ServiceAccount: "sa"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	a := &CertAuthenticator{CA: ca, Now: func() time.Time { return now }}
	creds := Credentials{PeerCertificates: []*x509.Certificate{iss.Cert}}
	for i := range 2 {
		c, err := a.Authenticate(context.Background(), creds)
		if err != nil || c.ID.ServiceAccount != "sa" {
			t.Fatalf("authentication %d: %+v, %v", i, c, err)
		}
	}
	if len(a.verified) != 1 {
		t.Errorf("%d chains remembered, want 1", len(a.verified))
	}
	now = now.Add(2 * time.Hour)
	if _, err := a.Authenticate(context.Background(), creds); !errors.Is(err, ErrCertExpired) {
		t.Errorf("remembered chain past its expiry: %v, want ErrCertExpired", err)
	}
}
