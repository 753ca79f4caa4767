package credentials

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"
)

func selfSigned(t *testing.T, cn string) (certPEM, keyPEM []byte) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn}, NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
}

// TestParse: each bad credential is refused with a reason naming the
// file; good ones are servable.
func TestParse(t *testing.T) {
	cert, key := selfSigned(t, "a")
	_, otherKey := selfSigned(t, "b")
	cases := []struct {
		name  string
		files map[string][]byte
		want  string // "" good
	}{
		{"good", map[string][]byte{CertFile: cert, KeyFile: key}, ""},
		{"good with CA", map[string][]byte{CertFile: cert, KeyFile: key, CAFile: cert}, ""},
		{"CA only", map[string][]byte{CAFile: cert}, ""},
		{"no cert", map[string][]byte{KeyFile: key}, "tls.crt is missing"},
		{"no key", map[string][]byte{CertFile: cert}, "tls.key is missing"},
		{"key of another cert", map[string][]byte{CertFile: cert, KeyFile: otherKey}, "private key does not match"},
		{"cert not PEM", map[string][]byte{CertFile: []byte("hello"), KeyFile: key}, "tls.crt and tls.key"},
		{"CA not PEM", map[string][]byte{CertFile: cert, KeyFile: key, CAFile: []byte("not pem at all")}, "ca.crt: not PEM"},
		{"CA holds a key", map[string][]byte{CertFile: cert, KeyFile: key, CAFile: append(append([]byte{}, cert...), key...)}, `ca.crt: a "EC PRIVATE KEY" block`},
		{"empty namespaces", map[string][]byte{CertFile: cert, KeyFile: key, NamespaceFile: []byte("\n")}, "lists no namespace"},
	}
	for _, tc := range cases {
		c := Parse("x", tc.files)
		switch {
		case tc.want == "" && c.Err != nil:
			t.Errorf("%s: %v", tc.name, c.Err)
		case tc.want != "" && (c.Err == nil || !strings.Contains(c.Err.Error(), tc.want)):
			t.Errorf("%s: error %v, want %q", tc.name, c.Err, tc.want)
		}
	}
}

// TestLookupScopesByNamespace: a credential is served only to the
// namespaces it names (istio-system when it names none), under its bare
// name or Istio's kubernetes:// one.
func TestLookupScopesByNamespace(t *testing.T) {
	cert, key := selfSigned(t, "a")
	set := NewSet([]*Credential{
		Parse("gw", map[string][]byte{CertFile: cert, KeyFile: key}),
		Parse("shop", map[string][]byte{CertFile: cert, KeyFile: key, NamespaceFile: []byte("shop web")}),
		Parse("bad", map[string][]byte{CertFile: cert}),
	})
	if _, err := set.Lookup("istio-system", "kubernetes://gw"); err != nil {
		t.Error(err)
	}
	if _, err := set.Lookup("shop", "gw"); !errors.Is(err, ErrNotPermitted) {
		t.Errorf("gw for shop: %v, want ErrNotPermitted", err)
	}
	if _, err := set.Lookup("web", "shop"); err != nil {
		t.Error(err)
	}
	if _, err := set.Lookup("istio-system", "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("nope: %v, want ErrNotFound", err)
	}
	if _, err := set.Lookup("istio-system", "bad"); err == nil {
		t.Error("a broken credential was served")
	}
	if err := set.Usable("istio-system", "gw", true); err == nil || !strings.Contains(err.Error(), "MUTUAL") {
		t.Errorf("MUTUAL without ca.crt: %v", err)
	}
	if p := set.Problems(); len(p) != 1 || p[0].Name != "bad" {
		t.Errorf("problems %v", p)
	}
}

// TestLookupGatewayAPIName: a Gateway API listener's certificate, named as
// istiod names it (kubernetes-gateway://<namespace>/<secret>), is the
// credential of the Secret's name, still scoped by namespace.
func TestLookupGatewayAPIName(t *testing.T) {
	cert, key := selfSigned(t, "a")
	set := NewSet([]*Credential{Parse("shop-cert", map[string][]byte{CertFile: cert, KeyFile: key, NamespaceFile: []byte("shop")})})
	if _, err := set.Lookup("shop", "kubernetes-gateway://shop/shop-cert"); err != nil {
		t.Error(err)
	}
	if _, err := set.Lookup("web", "kubernetes-gateway://shop/shop-cert"); !errors.Is(err, ErrNotPermitted) {
		t.Errorf("for web: %v, want ErrNotPermitted", err)
	}
	if _, err := set.Lookup("shop", "kubernetes-gateway://shop/nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("nope: %v, want ErrNotFound", err)
	}
}
