package identity

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"testing"
	"time"
)

// BenchmarkSignCSR is the CA's cost per certificate: parse and check a
// CSR (signature included), then sign it, with the self-signed ECDSA
// P-256 root. `make bench` reports it as CSRs signed per second.
func BenchmarkSignCSR(b *testing.B) {
	ca, err := LoadCA(CAOptions{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		key  crypto.Signer
	}{{"ecdsa-p256", newKey(b)}, {"rsa-2048", rsaKey}} {
		b.Run(c.name, func(b *testing.B) {
			csrPEM := csrFor(b, c.key, workload.String())
			for b.Loop() {
				csr, id, err := ParseCSR(csrPEM)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := ca.SignWorkload(csr, id, time.Hour); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "csr/s")
		})
	}
}
