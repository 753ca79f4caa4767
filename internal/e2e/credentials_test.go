package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/baremesh/baremesh/core/testkit"
	"github.com/baremesh/baremesh/internal/daemonconfig"
	"github.com/baremesh/baremesh/xdsserver/gen/gentest"
	"github.com/baremesh/baremesh/xdsserver/xdstype"
)

// testCA makes certificates for the credential tests.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T) *testCA {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "gateway test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns a server certificate for host and its key, PEM.
func (ca *testCA) issue(t *testing.T, host string, serial int64) (certPEM, keyPEM []byte) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: host}, DNSNames: []string{host},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
}

// writeCredential replaces credential name under dir with files.
func writeCredential(t *testing.T, dir, name string, files map[string][]byte) {
	t.Helper()
	tmp := filepath.Join(dir, "."+name+".new")
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	for f, b := range files {
		if err := os.WriteFile(filepath.Join(tmp, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	_ = os.RemoveAll(filepath.Join(dir, name))
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
}

const gatewayConfig = `apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: ingress, namespace: istio-system}
spec:
  selector: {istio: ingressgateway}
  servers:
  - port: {number: 443, name: www, protocol: HTTPS}
    hosts: [www.example.com]
    tls: {mode: SIMPLE, credentialName: www-cert}
  - port: {number: 443, name: mtls, protocol: HTTPS}
    hosts: [mtls.example.com]
    tls: {mode: MUTUAL, credentialName: mtls-cert}
  - port: {number: 443, name: shop, protocol: HTTPS}
    hosts: [shop.example.com]
    tls: {mode: SIMPLE, credentialName: shop-cert}
  - port: {number: 443, name: gone, protocol: HTTPS}
    hosts: [gone.example.com]
    tls: {mode: SIMPLE, credentialName: missing-cert}
`

// gatewayClient is a gateway's raw ADS stream (there is no Envoy binary
// here): over the TLS port with a client certificate of ns/sa when ns is
// set, else over the plaintext xdsAddr.
type gatewayClient struct {
	t  *testing.T
	st discovery.AggregatedDiscoveryService_StreamAggregatedResourcesClient
	// node is the gateway's node.
	node *corev3.Node
}

func newGatewayClient(t *testing.T, m *mesh, stateDir, ns, sa, nodeID string) *gatewayClient {
	t.Helper()
	addr, creds := m.d.XDSAddr(), insecure.NewCredentials()
	if ns != "" {
		certFile, keyFile, rootFile := certFiles(t, stateDir, ns, sa)
		root, _ := os.ReadFile(rootFile)
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(root)
		kp, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			t.Fatal(err)
		}
		addr, creds = m.d.TLSAddr(), credentials.NewTLS(&tls.Config{RootCAs: pool, ServerName: "127.0.0.1", Certificates: []tls.Certificate{kp}})
	}
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	st, err := discovery.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	labels, _ := structpb.NewStruct(map[string]any{"LABELS": map[string]any{"istio": "ingressgateway"}})
	return &gatewayClient{t: t, st: st, node: &corev3.Node{Id: nodeID, Metadata: labels}}
}

func (g *gatewayClient) send(typeURL, version, nonce string, names ...string) {
	g.t.Helper()
	if err := g.st.Send(&discovery.DiscoveryRequest{Node: g.node, TypeUrl: typeURL, VersionInfo: version, ResponseNonce: nonce, ResourceNames: names}); err != nil {
		g.t.Fatal(err)
	}
}

// recv returns the next response of typeURL, or the stream's error.
func (g *gatewayClient) recv(typeURL string) (*discovery.DiscoveryResponse, error) {
	for {
		r, err := g.st.Recv()
		if err != nil {
			return nil, err
		}
		if r.GetTypeUrl() == typeURL {
			return r, nil
		}
	}
}

const ingressNode = "router~10.9.0.1~ingress-abc.istio-system~istio-system.svc.cluster.local"

// TestGatewayCredentialsOverSDS (issue #14, item 5): a gateway gets the
// credentials its Gateway servers name over SDS, from the watched
// credentials directory, only those of its own namespace; a server whose
// credential is missing, of another namespace or broken is left out of
// LDS and named on /debug/configz; a credential rewritten on disk
// reaches the gateway. The gateway here is a raw gRPC ADS client on the
// TLS port with a certificate of its namespace (issue #24: secrets go
// only to an authenticated identity); the served certificate and key are
// checked with a real TLS handshake, and the Envoy side by ValidateAll.
// /debug/config_dump shows the secrets without their private keys.
func TestGatewayCredentialsOverSDS(t *testing.T) {
	ca := newTestCA(t)
	creds := t.TempDir()
	wwwCert, wwwKey := ca.issue(t, "www.example.com", 10)
	writeCredential(t, creds, "www-cert", map[string][]byte{"tls.crt": wwwCert, "tls.key": wwwKey})
	mCert, mKey := ca.issue(t, "mtls.example.com", 11)
	writeCredential(t, creds, "mtls-cert", map[string][]byte{"tls.crt": mCert, "tls.key": mKey, "ca.crt": ca.pem})
	sCert, sKey := ca.issue(t, "shop.example.com", 12)
	writeCredential(t, creds, "shop-cert", map[string][]byte{"tls.crt": sCert, "tls.key": sKey, "namespaces": []byte("shop\n")})
	stateDir := t.TempDir()
	m := startMeshWith(t, map[string]string{"gw.yaml": gatewayConfig}, func(c *daemonconfig.Config) {
		c.CredentialsDir = creds
		c.TLSAddr, c.StateDir, c.TLSSANs = "127.0.0.1:0", stateDir, []string{"127.0.0.1"}
	})
	g := newGatewayClient(t, m, stateDir, "istio-system", "ingress", ingressNode)
	send := g.send
	recv := func(typeURL string) *discovery.DiscoveryResponse {
		t.Helper()
		r, err := g.recv(typeURL)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	send(xdstype.Listener.URL, "", "")
	lds := recv(xdstype.Listener.URL)
	if got := chains(t, lds); !slices.Equal(got, []string{"mtls.example.com", "www.example.com"}) {
		t.Fatalf("gateway chains %v, want mtls and www only (shop's credential is another namespace's, gone's does not exist)", got)
	}
	send(xdstype.Listener.URL, lds.GetVersionInfo(), lds.GetNonce())

	send(xdstype.Secret.URL, "", "", "www-cert", "mtls-cert", "mtls-cert-cacert", "kubernetes://shop-cert")
	sds := recv(xdstype.Secret.URL)
	got := secrets(t, sds)
	if _, ok := got["kubernetes://shop-cert"]; ok || len(got) != 3 {
		t.Fatalf("secrets %v: want www-cert, mtls-cert, mtls-cert-cacert and never another namespace's", keys(got))
	}
	if !handshake(t, got["www-cert"], ca, "www.example.com") {
		t.Fatal("the served www-cert does not make a working TLS server")
	}
	if ca := got["mtls-cert-cacert"].GetValidationContext().GetTrustedCa().GetInlineBytes(); len(ca) == 0 {
		t.Error("mtls-cert-cacert carries no CA bundle")
	}
	send(xdstype.Secret.URL, sds.GetVersionInfo(), sds.GetNonce(), "www-cert", "mtls-cert", "mtls-cert-cacert", "kubernetes://shop-cert")

	// /debug/config_dump shows the secrets, never their keys.
	_, dump := httpGet(t, "http://"+m.d.HTTPAddr()+"/debug/config_dump?proxy="+ingressNode)
	for name, key := range map[string][]byte{"www-cert": wwwKey, "mtls-cert": mKey} {
		b64, _ := json.Marshal(key) // protojson and encoding/json write bytes alike (base64)
		if strings.Contains(dump, strings.Trim(string(b64), `"`)) || strings.Contains(dump, string(key)) {
			t.Errorf("/debug/config_dump shows %s's private key", name)
		}
	}
	if !strings.Contains(dump, "www-cert") || !strings.Contains(dump, "[redacted]") {
		t.Errorf("/debug/config_dump does not show the redacted secrets: %.300s", dump)
	}

	// A rotated certificate reaches the gateway.
	newCert, newKey := ca.issue(t, "www.example.com", 20)
	writeCredential(t, creds, "www-cert", map[string][]byte{"tls.crt": newCert, "tls.key": newKey})
	sds = recv(xdstype.Secret.URL)
	if s := secrets(t, sds)["www-cert"]; s == nil || string(s.GetTlsCertificate().GetCertificateChain().GetInlineBytes()) != string(newCert) {
		t.Fatal("the rotated www-cert did not reach the gateway")
	}
	send(xdstype.Secret.URL, sds.GetVersionInfo(), sds.GetNonce(), "www-cert", "mtls-cert", "mtls-cert-cacert", "kubernetes://shop-cert")

	// A key that does not match its certificate: the MUTUAL server goes,
	// www stays, and configz names the credential and the server.
	writeCredential(t, creds, "mtls-cert", map[string][]byte{"tls.crt": mCert, "tls.key": newKey, "ca.crt": ca.pem})
	lds = recv(xdstype.Listener.URL)
	if got := chains(t, lds); !slices.Equal(got, []string{"www.example.com"}) {
		t.Fatalf("after mtls-cert broke, chains %v, want www only", got)
	}
	var cz struct {
		Credentials []struct{ Credential, Gateway, Server, Error string } `json:"credentials"`
	}
	testkit.EventuallyWithin(t, 10*time.Second, "configz names the broken credential", func() bool {
		resp, err := http.Get("http://" + m.d.HTTPAddr() + "/debug/configz")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		if json.NewDecoder(resp.Body).Decode(&cz) != nil {
			return false
		}
		var seen []string
		for _, p := range cz.Credentials {
			seen = append(seen, p.Credential+"|"+p.Gateway+"|"+p.Server)
			if p.Credential == "mtls-cert" && p.Gateway == "" && !strings.Contains(p.Error, "private key does not match") {
				t.Errorf("mtls-cert problem %q does not say the key does not match", p.Error)
			}
		}
		slices.Sort(seen)
		return slices.Equal(seen, []string{"missing-cert|istio-system/ingress|gone", "mtls-cert|istio-system/ingress|mtls", "mtls-cert||", "shop-cert|istio-system/ingress|shop"})
	})
}

// chains are the server names of a gateway's LDS filter chains, checked
// by ValidateAll.
func chains(t *testing.T, r *discovery.DiscoveryResponse) []string {
	t.Helper()
	var out []string
	for _, a := range r.GetResources() {
		l := &listenerv3.Listener{}
		if err := a.UnmarshalTo(l); err != nil {
			t.Fatal(err)
		}
		if err := gentest.Check(l); err != nil {
			t.Errorf("listener %s: %v", l.GetName(), err)
		}
		for _, fc := range l.GetFilterChains() {
			out = append(out, fc.GetFilterChainMatch().GetServerNames()...)
		}
	}
	slices.Sort(out)
	return out
}

// secrets are an SDS response's secrets by name, checked by ValidateAll.
func secrets(t *testing.T, r *discovery.DiscoveryResponse) map[string]*tlsv3.Secret {
	t.Helper()
	out := map[string]*tlsv3.Secret{}
	for _, a := range r.GetResources() {
		s := &tlsv3.Secret{}
		if err := a.UnmarshalTo(s); err != nil {
			t.Fatal(err)
		}
		if err := gentest.Check(s); err != nil {
			t.Errorf("secret %s: %v", s.GetName(), err)
		}
		out[s.GetName()] = s
	}
	return out
}

// TestGatewaySecretsNeedIdentity (issue #24): gateway private keys go
// only to an authenticated identity of the credential's namespace, as
// istiod serves SDS only to a VerifiedIdentity. A process on the
// plaintext xdsAddr claiming the ingress gateway's node gets its
// listeners but not one secret; a gateway of namespace shop on the TLS
// port gets shop's credential and not istio-system's; a shop identity
// claiming istio-system's node, or another service account, is refused
// at connect, naming both (identity.CheckNode). Each
// refusal is counted once in baremesh_xds_reads_refused_total.
func TestGatewaySecretsNeedIdentity(t *testing.T) {
	ca := newTestCA(t)
	creds := t.TempDir()
	wwwCert, wwwKey := ca.issue(t, "www.example.com", 10)
	writeCredential(t, creds, "www-cert", map[string][]byte{"tls.crt": wwwCert, "tls.key": wwwKey})
	sCert, sKey := ca.issue(t, "shop.example.com", 12)
	writeCredential(t, creds, "shop-cert", map[string][]byte{"tls.crt": sCert, "tls.key": sKey, "namespaces": []byte("shop\n")})
	stateDir := t.TempDir()
	m := startMeshWith(t, map[string]string{"gw.yaml": gatewayConfig}, func(c *daemonconfig.Config) {
		c.CredentialsDir = creds
		c.TLSAddr, c.StateDir, c.TLSSANs = "127.0.0.1:0", stateDir, []string{"127.0.0.1"}
	})
	all := []string{"www-cert", "kubernetes://www-cert", "shop-cert", "kubernetes://shop-cert"}

	// Plaintext, claiming the ingress gateway.
	plain := newGatewayClient(t, m, "", "", "", ingressNode)
	plain.send(xdstype.Listener.URL, "", "")
	if _, err := plain.recv(xdstype.Listener.URL); err != nil {
		t.Fatal(err)
	}
	for i := range 2 { // the second request must not log or count again
		plain.send(xdstype.Secret.URL, "", "", all...)
		r, err := plain.recv(xdstype.Secret.URL)
		if err != nil {
			t.Fatal(err)
		}
		if got := secrets(t, r); len(got) != 0 {
			t.Fatalf("request %d: a plaintext client claiming the ingress gateway got secrets %v", i, keys(got))
		}
	}

	// Namespace shop, authenticated: its own credential only.
	shop := newGatewayClient(t, m, stateDir, "shop", "shop-gw", "router~10.9.0.2~shop-gw-1.shop~shop.svc.cluster.local")
	shop.send(xdstype.Secret.URL, "", "", all...)
	r, err := shop.recv(xdstype.Secret.URL)
	if err != nil {
		t.Fatal(err)
	}
	if got := secrets(t, r); !slices.Equal(keys(got), []string{"kubernetes://shop-cert", "shop-cert"}) {
		t.Fatalf("shop's gateway got %v, want shop-cert only (www-cert is istio-system's)", keys(got))
	}

	// Shop's identity claiming istio-system's gateway.
	liar := newGatewayClient(t, m, stateDir, "shop", "shop-gw", ingressNode)
	liar.send(xdstype.Secret.URL, "", "", all...)
	_, err = liar.recv(xdstype.Secret.URL)
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "istio-system") || !strings.Contains(err.Error(), "spiffe://cluster.local/ns/shop/sa/shop-gw") {
		t.Fatalf("shop's identity claiming istio-system's node: %v, want PermissionDenied naming both", err)
	}

	// Shop's identity claiming another service account (SERVICE_ACCOUNT).
	liar = newGatewayClient(t, m, stateDir, "shop", "shop-gw", "router~10.9.0.2~shop-gw-1.shop~shop.svc.cluster.local")
	liar.node.Metadata.Fields["SERVICE_ACCOUNT"] = structpb.NewStringValue("shop-admin")
	liar.send(xdstype.Secret.URL, "", "", all...)
	_, err = liar.recv(xdstype.Secret.URL)
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), `"shop-admin"`) || !strings.Contains(err.Error(), "spiffe://cluster.local/ns/shop/sa/shop-gw") {
		t.Fatalf("shop-gw claiming SERVICE_ACCOUNT shop-admin: %v, want PermissionDenied naming both", err)
	}

	_, metrics := httpGet(t, "http://"+m.d.HTTPAddr()+"/metrics")
	if want := `baremesh_xds_reads_refused_total{reason="unauthenticated",type="sds"} 1`; !strings.Contains(metrics, want) {
		t.Errorf("metrics lack %q", want)
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// handshake serves TLS on loopback with secret s and connects to it
// verifying with ca for host.
func handshake(t *testing.T, s *tlsv3.Secret, ca *testCA, host string) bool {
	t.Helper()
	pair, err := tls.X509KeyPair(s.GetTlsCertificate().GetCertificateChain().GetInlineBytes(), s.GetTlsCertificate().GetPrivateKey().GetInlineBytes())
	if err != nil {
		t.Errorf("served secret: %v", err)
		return false
	}
	lis, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pair}})
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	go func() {
		c, err := lis.Accept()
		if err == nil {
			_ = c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", lis.Addr().String(), &tls.Config{RootCAs: pool, ServerName: host})
	if err != nil {
		t.Errorf("TLS handshake with the served credential: %v", err)
		return false
	}
	conn.Close()
	return true
}
