package identity

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/pem"
	"errors"
	"testing"
)

func TestParseCSR(t *testing.T) {
	rsa2048, _ := rsa.GenerateKey(rand.Reader, 2048)
	p521, _ := ecdsa.GenerateKey(elliptic.P521(), rand.Reader)
	_, ed, _ := ed25519.GenerateKey(rand.Reader)
	good := csrFor(t, newKey(t), workload.String())
	tampered := func() []byte {
		b, _ := pem.Decode(good)
		der := bytes.Clone(b.Bytes)
		der[len(der)-5] ^= 0xff // inside the signature
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
	}()
	cases := []struct {
		name string
		csr  []byte
		want error
	}{
		{"ecdsa p256", good, nil},
		{"rsa 2048", csrFor(t, rsa2048, workload.String()), nil},
		{"1 MB of garbage", bytes.Repeat([]byte("A"), 1<<20), ErrCSRTooLarge},
		{"garbage", []byte("not a csr"), ErrCSRInvalid},
		{"wrong PEM type", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte{1}}), ErrCSRInvalid},
		{"garbage DER", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: []byte{1, 2, 3}}), ErrCSRInvalid},
		{"bad signature", tampered, ErrCSRInvalid},
		{"p521 key", csrFor(t, p521, workload.String()), ErrCSRKeyUnsupported},
		{"ed25519 key", csrFor(t, ed, workload.String()), ErrCSRKeyUnsupported},
		{"no SAN", csrFor(t, newKey(t)), ErrCSRIdentity},
		{"two SANs", csrFor(t, newKey(t), workload.String(), "spiffe://cluster.local/ns/x/sa/y"), ErrCSRIdentity},
		{"not SPIFFE", csrFor(t, newKey(t), "https://example.com/x"), ErrCSRIdentity},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, id, err := ParseCSR(c.csr)
			if !errors.Is(err, c.want) || (c.want == nil && id != workload) {
				t.Fatalf("ParseCSR = %+v, %v; want %v", id, err, c.want)
			}
		})
	}
}

func FuzzParseCSR(f *testing.F) {
	f.Add(csrFor(f, newKey(f), workload.String()))
	f.Add([]byte("-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		csr, id, err := ParseCSR(data)
		if err == nil && (csr == nil || id.Validate() != nil || csr.CheckSignature() != nil) {
			t.Fatalf("accepted a CSR that does not check out: %+v", id)
		}
		if err != nil && Reason(err) == "other" {
			t.Fatalf("error without a reason: %v", err)
		}
	})
}
