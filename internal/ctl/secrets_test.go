package ctl

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"
)

// TestSecretTable: proxy-config secret shows each SDS secret's kind,
// serial and validity from the certificate itself, as istioctl does, and
// names a secret whose bytes are no certificate.
func TestSecretTable(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	nb, na := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Now().Add(time.Hour)
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{SerialNumber: big.NewInt(0xbeef), Subject: pkix.Name{CommonName: "www"},
		NotBefore: nb, NotAfter: na}, &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "www"}}, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	b64 := base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	res := []map[string]any{
		{"name": "kubernetes://www-cert", "tlsCertificate": map[string]any{"certificateChain": map[string]any{"inlineBytes": b64},
			"privateKey": map[string]any{"inlineString": "[redacted]"}}},
		{"name": "www-cert-cacert", "validationContext": map[string]any{"trustedCa": map[string]any{"inlineBytes": b64}}},
		{"name": "broken", "validationContext": map[string]any{"trustedCa": map[string]any{"inlineBytes": "bm90IGEgY2VydA=="}}},
	}
	var out bytes.Buffer
	secretTable(&out, res, configFilter{})
	got := out.String()
	for _, want := range []string{
		"kubernetes://www-cert", "Cert Chain", "www-cert-cacert", "CA", "beef", na.UTC().Format(time.RFC3339), "2026-01-01T00:00:00Z",
		"broken", "no PEM certificate",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in\n%s", want, got)
		}
	}
	if strings.Count(got, "true") != 2 {
		t.Errorf("want the two good certificates valid:\n%s", got)
	}
}
