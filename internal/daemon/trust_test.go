package daemon

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	pb "istio.io/api/security/v1alpha1"

	"github.com/baremesh/baremesh/core/identity"
	"github.com/baremesh/baremesh/core/testkit"
	"github.com/baremesh/baremesh/internal/daemonconfig"
)

// trustReplica is one baremeshd of a test cluster with the TLS port on.
type trustReplica struct {
	*Daemon
	cfg daemonconfig.Config
}

func (r trustReplica) tokens() *identity.TokenStore {
	return &identity.TokenStore{Dir: filepath.Join(r.cfg.StateDir, "tokens")}
}

// startTrustReplica runs a replica named name, seeded with seeds, over a
// fresh state directory, gossip encrypted with keyFile.
func startTrustReplica(t *testing.T, name, keyFile string, seeds ...string) trustReplica {
	t.Helper()
	cfg := identityConfig(t)
	cfg.Cluster = daemonconfig.ClusterConfig{Name: name, Bind: "127.0.0.1:0", Seeds: seeds, KeyFile: keyFile}
	return trustReplica{Daemon: runDaemon(t, cfg), cfg: cfg}
}

// csrCall asks r's CA for a certificate for id over a real TLS
// connection that trusts root and checks the server's name as Istio's
// agent does, authenticated by a bearer token or by a client certificate.
func csrCall(t *testing.T, r trustReplica, root []byte, id, token string, client *tls.Certificate) (*pb.IstioCertificateResponse, crypto.Signer, error) {
	t.Helper()
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(root) {
		t.Fatal("no root certificate")
	}
	tc := &tls.Config{RootCAs: roots, ServerName: "istiod.istio-system.svc"}
	if client != nil {
		tc.Certificates = []tls.Certificate{*client}
	}
	conn, err := grpc.NewClient(r.TLSAddr(), grpc.WithTransportCredentials(credentials.NewTLS(tc)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(id)
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{URIs: []*url.URL{u}}, k)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	}
	resp, err := pb.NewIstioCertificateServiceClient(conn).CreateCertificate(ctx, &pb.IstioCertificateRequest{
		Csr: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})), ValidityDuration: 3600})
	return resp, k, err
}

// TestReplicasShareTrust (issue #32 item 0): three replicas with an
// encrypted cluster and fresh state directories sign under one root: a
// proxy holding the root of one verifies every replica's TLS port (the
// name Istio's agent checks), a certificate one replica issued
// authenticates at another, a join token minted on one replica is spent
// on another, its use count holds across them, and a revocation on one
// applies on the others within seconds.
func TestReplicasShareTrust(t *testing.T) {
	keyFile := filepath.Join(t.TempDir(), "cluster.key")
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	if err := os.WriteFile(keyFile, []byte(base64.StdEncoding.EncodeToString(key)), 0o600); err != nil {
		t.Fatal(err)
	}
	a := startTrustReplica(t, "cp-a", keyFile)
	b := startTrustReplica(t, "cp-b", keyFile, a.Cluster().Addr())
	c := startTrustReplica(t, "cp-c", keyFile, a.Cluster().Addr())
	root, err := os.ReadFile(filepath.Join(a.cfg.StateDir, "ca", identity.RootCertFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []trustReplica{b, c} {
		got, err := os.ReadFile(filepath.Join(r.cfg.StateDir, "ca", identity.RootCertFile))
		if err != nil || !bytes.Equal(got, root) {
			t.Fatalf("%s's root is not cp-a's: %v", r.Cluster().Name(), err)
		}
	}

	// A token minted on cp-a (baremeshctl on cp-a's host), at most 2 uses.
	const id = "spiffe://cluster.local/ns/default/sa/vm"
	tok, rec, err := a.tokens().Create(identity.TokenSpec{Namespace: "default", ServiceAccount: "vm", TTL: time.Hour, MaxUses: 2})
	if err != nil {
		t.Fatal(err)
	}
	minted := time.Now()
	var resp *pb.IstioCertificateResponse
	var leafKey crypto.Signer
	testkit.Eventually(t, "cp-b to know cp-a's token", func() bool {
		list, _ := b.tokens().List()
		return len(list) == 1 && list[0].ID == rec.ID
	})
	t.Logf("a token minted on cp-a known to cp-b after %v", time.Since(minted).Round(time.Millisecond))
	if resp, leafKey, err = csrCall(t, b, root, id, tok, nil); err != nil {
		t.Fatalf("cp-a's token spent on cp-b: %v", err)
	}
	// The certificate cp-b issued authenticates at cp-a (a renewal).
	var chain [][]byte
	for _, p := range resp.GetCertChain() {
		chain = append(chain, pemBlock(t, p))
	}
	client := &tls.Certificate{Certificate: chain, PrivateKey: leafKey}
	if _, _, err := csrCall(t, a, root, id, "", client); err != nil {
		t.Fatalf("cp-b's certificate at cp-a: %v", err)
	}
	// The second use, on cp-a; once cp-c has heard of both, a third
	// there is refused.
	if _, _, err := csrCall(t, a, root, id, tok, nil); err != nil {
		t.Fatalf("second use on cp-a: %v", err)
	}
	testkit.Eventually(t, "cp-c to count both uses", func() bool {
		list, _ := c.tokens().List()
		return len(list) == 1 && list[0].Uses == 2
	})
	if _, _, err := csrCall(t, c, root, id, tok, nil); err == nil {
		t.Fatal("a third use of a 2-use token on cp-c was accepted")
	}

	// A token minted on cp-c, revoked on cp-b.
	tok2, rec2, err := c.tokens().Create(identity.TokenSpec{Namespace: "default", ServiceAccount: "vm", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "cp-b to know cp-c's token", func() bool {
		_, err := b.tokens().Revoke(rec2.ID)
		return err == nil
	})
	revoked := time.Now()
	for _, r := range []trustReplica{a, c} {
		testkit.EventuallyWithin(t, 5*time.Second, r.Cluster().Name()+" to hold the revocation", func() bool {
			list, _ := r.tokens().List()
			for _, x := range list {
				if x.ID == rec2.ID {
					return x.Revoked != nil
				}
			}
			return false
		})
	}
	t.Logf("a revocation on cp-b applied on cp-a and cp-c after %v", time.Since(revoked).Round(time.Millisecond))
	for _, r := range []trustReplica{a, c} {
		if _, _, err := csrCall(t, r, root, id, tok2, nil); err == nil {
			t.Errorf("%s accepted a token revoked on cp-b", r.Cluster().Name())
		}
	}
}

// TestReplicaTakesClusterCA: a replica whose CA was lost (its state
// directory holds spent join tokens, so alone it is refused:
// TestCAMissingRefused) takes the cluster's CA when it shares the
// cluster's trust, instead of making a new root or refusing.
func TestReplicaTakesClusterCA(t *testing.T) {
	keyFile := filepath.Join(t.TempDir(), "cluster.key")
	if err := os.WriteFile(keyFile, []byte(base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))), 0o600); err != nil {
		t.Fatal(err)
	}
	a := startTrustReplica(t, "cp-a", keyFile)
	cfg := identityConfig(t)
	cfg.Cluster = daemonconfig.ClusterConfig{Name: "cp-b", Bind: "127.0.0.1:0", Seeds: []string{a.Cluster().Addr()}, KeyFile: keyFile}
	store := &identity.TokenStore{Dir: filepath.Join(cfg.StateDir, "tokens")}
	tok, _, err := store.Create(identity.TokenSpec{Namespace: "default", ServiceAccount: "vm", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Use(tok); err != nil {
		t.Fatal(err)
	}
	if _, _, err := CheckConfig(append(checkConfigArgs(cfg, true), "--config", writeClusterConfig(t, cfg))); err != nil {
		t.Errorf("check-config of a replica that will take the cluster's CA: %v", err)
	}
	runDaemon(t, cfg)
	want, _ := os.ReadFile(filepath.Join(a.cfg.StateDir, "ca", identity.RootCertFile))
	got, err := os.ReadFile(filepath.Join(cfg.StateDir, "ca", identity.RootCertFile))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("cp-b's root after the start is not the cluster's: %v", err)
	}
}

// writeClusterConfig writes cfg's cluster: block as a config file (the
// cluster is not a flag).
func writeClusterConfig(t *testing.T, cfg daemonconfig.Config) string {
	t.Helper()
	data, err := json.Marshal(map[string]any{"cluster": cfg.Cluster})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "baremesh.yaml")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
