package identity

import (
	"context"
	"crypto/x509"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var workload = ID{TrustDomain: "cluster.local", Namespace: "bar", ServiceAccount: "vm-sa"}

// verifyLeaf checks a workload certificate as a peer would: chain to the
// root, SPIFFE SAN, key usages, validity.
func verifyLeaf(t *testing.T, ca *CA, is *Issued, want ID, ttl time.Duration) {
	t.Helper()
	if len(is.Chain) < 2 || is.Chain[len(is.Chain)-1] != string(ca.RootPEM()) {
		t.Fatalf("chain: want leaf ... root-cert.pem last, got %d elements", len(is.Chain))
	}
	inter := x509.NewCertPool()
	for _, p := range is.Chain[1 : len(is.Chain)-1] {
		inter.AppendCertsFromPEM([]byte(p))
	}
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if _, err := is.Cert.Verify(x509.VerifyOptions{Roots: ca.Roots(), Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
			t.Fatalf("verify for %v: %v", usage, err)
		}
	}
	if len(is.Cert.URIs) != 1 || is.Cert.URIs[0].String() != want.String() {
		t.Fatalf("URI SANs %v, want %s", is.Cert.URIs, want)
	}
	if is.Cert.IsCA || is.Cert.KeyUsage&x509.KeyUsageDigitalSignature == 0 {
		t.Fatalf("leaf IsCA=%v KeyUsage=%v", is.Cert.IsCA, is.Cert.KeyUsage)
	}
	if d := time.Until(is.Cert.NotAfter); d > ttl || d < ttl-time.Minute {
		t.Fatalf("NotAfter in %v, want about %v", d, ttl)
	}
	// openssl verify, a second opinion on the chain and the purpose.
	dir := t.TempDir()
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	args := []string{"verify", "-purpose", "sslclient", "-CAfile", write("root.pem", string(ca.RootPEM()))}
	if len(is.Chain) > 2 {
		args = append(args, "-untrusted", write("inter.pem", strings.Join(is.Chain[1:len(is.Chain)-1], "")))
	}
	out, err := exec.Command("openssl", append(args, write("leaf.pem", is.Chain[0]))...).CombinedOutput()
	if err != nil {
		t.Fatalf("openssl verify: %v: %s", err, out)
	}
}

func TestSelfSignedCAGeneratedAndReused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ca")
	ca, err := LoadCA(CAOptions{Dir: dir, Organization: "cluster.local"})
	if err != nil {
		t.Fatal(err)
	}
	if !ca.Generated {
		t.Fatal("first start: want a generated root")
	}
	for name, mode := range map[string]os.FileMode{CAKeyFile: 0o600, CACertFile: 0o600, RootCertFile: 0o644, ".": 0o700 | os.ModeDir} {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil || st.Mode() != mode {
			t.Fatalf("%s: mode %v (%v), want %v", name, st.Mode(), err, mode)
		}
	}
	again, err := LoadCA(CAOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if again.Generated || string(again.RootPEM()) != string(ca.RootPEM()) {
		t.Fatal("restart: want the same root, not a new one")
	}
	csr, id, err := ParseCSR(csrFor(t, newKey(t), workload.String()))
	if err != nil {
		t.Fatal(err)
	}
	is, err := again.SignWorkload(csr, id, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if len(is.Chain) != 2 {
		t.Fatalf("self-signed chain: want leaf + root, got %d", len(is.Chain))
	}
	verifyLeaf(t, ca, is, workload, time.Hour)
}

func TestPluggedCA(t *testing.T) {
	dir, root, inter := pluggedDir(t)
	ca, err := LoadCA(CAOptions{Dir: dir, Plugged: true})
	if err != nil {
		t.Fatal(err)
	}
	csr, id, err := ParseCSR(csrFor(t, newKey(t), workload.String()))
	if err != nil {
		t.Fatal(err)
	}
	is, err := ca.SignWorkload(csr, id, 2*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	// leaf, intermediate, root: the root from cert-chain.pem is not repeated.
	if len(is.Chain) != 3 || is.Chain[1] != string(certPEM(inter)) || is.Chain[2] != string(certPEM(root)) {
		t.Fatalf("chain: %q", is.Chain)
	}
	verifyLeaf(t, ca, is, workload, 2*time.Hour)
	// A leaf never outlives its signer.
	is, err = ca.SignWorkload(csr, id, 1000*time.Hour)
	if err != nil || !is.Cert.NotAfter.Equal(inter.NotAfter) {
		t.Fatalf("NotAfter %v, want the intermediate's %v (%v)", is.Cert.NotAfter, inter.NotAfter, err)
	}
}

func TestCABadDirectories(t *testing.T) {
	write := func(dir, name string, data []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name, want string
		plugged    bool
		setup      func(t *testing.T, dir string)
	}{
		{"plugged but empty", "Istio cacerts layout wants", true, func(*testing.T, string) {}},
		{"key without cert", "ca-cert.pem: no such file", false, func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, CACertFile)) }},
		{"key does not match cert", "does not match", false, func(t *testing.T, dir string) {
			write(dir, CAKeyFile, keyPEM(t, newKey(t)))
		}},
		{"garbage key", "ca-key.pem: no PEM block", false, func(t *testing.T, dir string) { write(dir, CAKeyFile, []byte("garbage")) }},
		{"garbage cert", "ca-cert.pem: no PEM certificate", false, func(t *testing.T, dir string) { write(dir, CACertFile, []byte("garbage")) }},
		{"root does not sign cert", "does not chain to root-cert.pem", false, func(t *testing.T, dir string) {
			write(dir, RootCertFile, certPEM(caCert(t, "other", newKey(t), nil, nil)))
		}},
		{"missing root", "root-cert.pem", false, func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, RootCertFile)) }},
		{"cert is not a CA", "not a CA certificate", false, func(t *testing.T, dir string) {
			ca, err := LoadCA(CAOptions{Dir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			is, key, err := ca.SignServer([]string{"x"}, nil, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			write(dir, CACertFile, []byte(is.Chain[0]))
			write(dir, CAKeyFile, keyPEM(t, key))
			write(dir, RootCertFile, ca.RootPEM())
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if _, err := LoadCA(CAOptions{Dir: dir}); err != nil && !c.plugged {
				t.Fatal(err)
			}
			if c.plugged {
				dir = t.TempDir()
			}
			c.setup(t, dir)
			_, err := LoadCA(CAOptions{Dir: dir, Plugged: c.plugged})
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), dir) {
				t.Fatalf("LoadCA: %v; want an error naming %s and %q", err, dir, c.want)
			}
		})
	}
	t.Run("directory is a file", func(t *testing.T) {
		f := filepath.Join(t.TempDir(), "ca")
		write(filepath.Dir(f), "ca", []byte("x"))
		if _, err := LoadCA(CAOptions{Dir: f}); err == nil || !strings.Contains(err.Error(), "not a directory") {
			t.Fatalf("LoadCA: %v", err)
		}
	})
}

// TestIssueWorkload: a certificate issued without a CSR carries the
// identity's SPIFFE URI, chains to the root, and authenticates as it;
// an invalid identity is refused.
func TestIssueWorkload(t *testing.T) {
	ca, err := LoadCA(CAOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	id := ID{TrustDomain: "cluster.local", Namespace: "ns", ServiceAccount: "sa"}
	is, key, err := ca.IssueWorkload(id, time.Hour)
	if err != nil || key == nil {
		t.Fatalf("IssueWorkload: %v", err)
	}
	if len(is.Cert.URIs) != 1 || is.Cert.URIs[0].String() != "spiffe://cluster.local/ns/ns/sa/sa" {
		t.Fatalf("URIs = %v", is.Cert.URIs)
	}
	caller, err := (&CertAuthenticator{CA: ca}).Authenticate(context.Background(), Credentials{PeerCertificates: []*x509.Certificate{is.Cert}})
	if err != nil || caller.ID != id {
		t.Fatalf("authenticate: %+v, %v", caller, err)
	}
	if _, _, err := ca.IssueWorkload(ID{TrustDomain: "cluster.local", Namespace: "Bad_NS", ServiceAccount: "sa"}, time.Hour); err == nil {
		t.Fatal("invalid identity issued")
	}
}
