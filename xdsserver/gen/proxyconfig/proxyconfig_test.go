package proxyconfig_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	meshv1alpha1 "istio.io/api/mesh/v1alpha1"

	"github.com/baremesh/baremesh/core/push"
	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/gentest"
	"github.com/baremesh/baremesh/xdsserver/gen/proxyconfig"
)

// cert makes a self-signed certificate (a CA when ca) in PEM.
func cert(t *testing.T, cn string, ca bool) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Unix(0, 0), NotAfter: time.Unix(4e9, 0), IsCA: ca, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

func TestTrustBundle(t *testing.T) {
	own, other, extra := cert(t, "own root", true), cert(t, "old root", true), cert(t, "other mesh", true)
	pc := &push.PushContext{
		// root-cert.pem of a CA in rotation: two roots.
		TrustRoots: []byte(own + other),
		Mesh: &meshv1alpha1.MeshConfig{CaCertificates: []*meshv1alpha1.MeshConfig_CertificateData{
			{CertificateData: &meshv1alpha1.MeshConfig_CertificateData_Pem{Pem: "\n" + extra}, TrustDomains: []string{"other.example"}},
			{CertificateData: &meshv1alpha1.MeshConfig_CertificateData_Pem{Pem: own}}, // the same root again
			{CertificateData: &meshv1alpha1.MeshConfig_CertificateData_SpiffeBundleUrl{SpiffeBundleUrl: "https://bundle.example/"}},
		}},
	}
	res, err := proxyconfig.Generate(gen.Input{Push: pc})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || res[0].Name != "" {
		t.Fatalf("want one unnamed resource, got %d", len(res))
	}
	// The agent unpacks an Any of this type URL into istio.io/api's
	// ProxyConfig.
	a, err := anypb.New(res[0].Resource)
	if err != nil {
		t.Fatal(err)
	}
	if a.TypeUrl != proxyconfig.TypeURL {
		t.Fatalf("type URL %s, want %s", a.TypeUrl, proxyconfig.TypeURL)
	}
	var got meshv1alpha1.ProxyConfig
	if err := a.UnmarshalTo(&got); err != nil {
		t.Fatal(err)
	}
	want := []string{own, other, extra}
	slices.Sort(want)
	if !slices.Equal(got.GetCaCertificatesPem(), want) {
		t.Fatalf("bundle: %d entries %q, want the 3 roots, sorted, once each", len(got.GetCaCertificatesPem()), got.GetCaCertificatesPem())
	}
	// Deterministic bytes: a regeneration is not a change.
	b1, _ := proto.MarshalOptions{Deterministic: true}.Marshal(res[0].Resource)
	res2, _ := proxyconfig.Generate(gen.Input{Push: pc})
	b2, _ := proto.MarshalOptions{Deterministic: true}.Marshal(res2[0].Resource)
	if string(b1) != string(b2) {
		t.Fatal("two generations differ")
	}
}

func TestTrustBundleEmpty(t *testing.T) {
	res, err := proxyconfig.Generate(gen.Input{Push: &push.PushContext{}})
	if err != nil || len(res) != 1 || len(res[0].Resource.(*meshv1alpha1.ProxyConfig).GetCaCertificatesPem()) != 0 {
		t.Fatalf("no CA, no mesh config: %v %v", res, err)
	}
}

// TestTrustBundleRefusesBadEntries: an entry that is not a CA
// certificate is an error naming it and why, not a silent drop.
func TestTrustBundleRefusesBadEntries(t *testing.T) {
	for _, tc := range []struct{ name, pem, want string }{
		{"leaf", cert(t, "a leaf", false), `caCertificates[0] (trustDomains [td]): PEM block 1 (subject "CN=a leaf") is not a CA certificate`},
		{"junk", "not a certificate", "caCertificates[0] (trustDomains [td]): no PEM certificate in it"},
		{"bad DER", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", "caCertificates[0] (trustDomains [td]): PEM block 1: x509:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pc := &push.PushContext{Mesh: &meshv1alpha1.MeshConfig{CaCertificates: []*meshv1alpha1.MeshConfig_CertificateData{
				{CertificateData: &meshv1alpha1.MeshConfig_CertificateData_Pem{Pem: tc.pem}, TrustDomains: []string{"td"}}}}}
			_, err := proxyconfig.Generate(gen.Input{Push: pc})
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "proxyconfig: mesh config ") {
				t.Fatalf("err %v, want one with %q", err, tc.want)
			}
		})
	}
}

// The resource is not an Envoy type; gentest.Validate checks what it can.
func TestValidates(t *testing.T) {
	res, err := proxyconfig.Generate(gen.Input{Push: &push.PushContext{TrustRoots: []byte(cert(t, "r", true))}})
	if err != nil {
		t.Fatal(err)
	}
	gentest.Validate(t, res)
}
