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
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/baremesh/baremesh/core/testkit"
	"github.com/baremesh/baremesh/internal/daemon"
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

// TestGatewayCredentialsOverSDS (issue #14, item 5): a gateway gets the
// credentials its Gateway servers name over SDS, from the watched
// credentials directory, only those of its own namespace; a server whose
// credential is missing, of another namespace or broken is left out of
// LDS and named on /debug/configz; a credential rewritten on disk
// reaches the gateway. The gateway here is a raw gRPC ADS client (there
// is no Envoy binary here); the served certificate and key are checked
// with a real TLS handshake, and the Envoy side by ValidateAll.
func TestGatewayCredentialsOverSDS(t *testing.T) {
	ca := newTestCA(t)
	creds := t.TempDir()
	wwwCert, wwwKey := ca.issue(t, "www.example.com", 10)
	writeCredential(t, creds, "www-cert", map[string][]byte{"tls.crt": wwwCert, "tls.key": wwwKey})
	mCert, mKey := ca.issue(t, "mtls.example.com", 11)
	writeCredential(t, creds, "mtls-cert", map[string][]byte{"tls.crt": mCert, "tls.key": mKey, "ca.crt": ca.pem})
	sCert, sKey := ca.issue(t, "shop.example.com", 12)
	writeCredential(t, creds, "shop-cert", map[string][]byte{"tls.crt": sCert, "tls.key": sKey, "namespaces": []byte("shop\n")})
	m := startMeshWith(t, map[string]string{"gw.yaml": gatewayConfig}, func(c *daemon.Config) { c.CredentialsDir = creds })

	cc, err := grpc.NewClient(m.d.XDSAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := discovery.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	labels, _ := structpb.NewStruct(map[string]any{"LABELS": map[string]any{"istio": "ingressgateway"}})
	node := &corev3.Node{Id: "router~10.9.0.1~ingress-abc.istio-system~istio-system.svc.cluster.local", Metadata: labels}
	send := func(typeURL, version, nonce string, names ...string) {
		t.Helper()
		if err := st.Send(&discovery.DiscoveryRequest{Node: node, TypeUrl: typeURL, VersionInfo: version, ResponseNonce: nonce, ResourceNames: names}); err != nil {
			t.Fatal(err)
		}
	}
	recv := func(typeURL string) *discovery.DiscoveryResponse {
		t.Helper()
		for {
			r, err := st.Recv()
			if err != nil {
				t.Fatal(err)
			}
			if r.GetTypeUrl() == typeURL {
				return r
			}
		}
	}
	chains := func(r *discovery.DiscoveryResponse) []string {
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
	send(xdstype.Listener.URL, "", "")
	lds := recv(xdstype.Listener.URL)
	if got := chains(lds); !slices.Equal(got, []string{"mtls.example.com", "www.example.com"}) {
		t.Fatalf("gateway chains %v, want mtls and www only (shop's credential is another namespace's, gone's does not exist)", got)
	}
	send(xdstype.Listener.URL, lds.GetVersionInfo(), lds.GetNonce())

	secrets := func(r *discovery.DiscoveryResponse) map[string]*tlsv3.Secret {
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
	send(xdstype.Secret.URL, "", "", "www-cert", "mtls-cert", "mtls-cert-cacert", "kubernetes://shop-cert")
	sds := recv(xdstype.Secret.URL)
	got := secrets(sds)
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

	// A rotated certificate reaches the gateway.
	newCert, newKey := ca.issue(t, "www.example.com", 20)
	writeCredential(t, creds, "www-cert", map[string][]byte{"tls.crt": newCert, "tls.key": newKey})
	sds = recv(xdstype.Secret.URL)
	if s := secrets(sds)["www-cert"]; s == nil || string(s.GetTlsCertificate().GetCertificateChain().GetInlineBytes()) != string(newCert) {
		t.Fatal("the rotated www-cert did not reach the gateway")
	}
	send(xdstype.Secret.URL, sds.GetVersionInfo(), sds.GetNonce(), "www-cert", "mtls-cert", "mtls-cert-cacert", "kubernetes://shop-cert")

	// A key that does not match its certificate: the MUTUAL server goes,
	// www stays, and configz names the credential and the server.
	writeCredential(t, creds, "mtls-cert", map[string][]byte{"tls.crt": mCert, "tls.key": newKey, "ca.crt": ca.pem})
	lds = recv(xdstype.Listener.URL)
	if got := chains(lds); !slices.Equal(got, []string{"www.example.com"}) {
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
