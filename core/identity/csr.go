package identity

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
)

// MaxCSRSize bounds a PEM CSR (an RSA 4096 CSR is under 2 KiB).
const MaxCSRSize = 32 << 10

// CSR errors; each is refused before anything is signed. All are permanent
// for the request that carried them.
var (
	ErrCSRTooLarge       = errors.New("CSR too large")
	ErrCSRInvalid        = errors.New("CSR invalid")
	ErrCSRKeyUnsupported = errors.New("CSR key unsupported (want ECDSA P-256/P-384 or RSA 2048-4096)")
	ErrCSRIdentity       = errors.New("CSR identity invalid")
)

// ParseCSR reads a PEM CSR, checks its signature and key, and returns it
// with the SPIFFE ID it asks for (its single URI SAN).
func ParseCSR(csrPEM []byte) (*x509.CertificateRequest, ID, error) {
	if len(csrPEM) > MaxCSRSize {
		return nil, ID{}, fmt.Errorf("%w: %d bytes, limit %d", ErrCSRTooLarge, len(csrPEM), MaxCSRSize)
	}
	block, _ := pem.Decode(csrPEM)
	if block == nil {
		return nil, ID{}, fmt.Errorf("%w: no PEM block", ErrCSRInvalid)
	}
	if block.Type != "CERTIFICATE REQUEST" && block.Type != "NEW CERTIFICATE REQUEST" {
		return nil, ID{}, fmt.Errorf("%w: PEM block is %q, want CERTIFICATE REQUEST", ErrCSRInvalid, block.Type)
	}
	csr, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, ID{}, fmt.Errorf("%w: %v", ErrCSRInvalid, err)
	}
	if err := checkKey(csr.PublicKey); err != nil {
		return nil, ID{}, err
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, ID{}, fmt.Errorf("%w: signature: %v", ErrCSRInvalid, err)
	}
	if len(csr.URIs) != 1 {
		return nil, ID{}, fmt.Errorf("%w: want exactly one URI SAN (the SPIFFE ID), got %d", ErrCSRIdentity, len(csr.URIs))
	}
	id, err := IDFromURL(csr.URIs[0])
	if err != nil {
		return nil, ID{}, fmt.Errorf("%w: %v", ErrCSRIdentity, err)
	}
	return csr, id, nil
}

func checkKey(pub any) error {
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		if k.Curve == elliptic.P256() || k.Curve == elliptic.P384() {
			return nil
		}
		return fmt.Errorf("%w: ECDSA curve %s", ErrCSRKeyUnsupported, k.Curve.Params().Name)
	case *rsa.PublicKey:
		if n := k.N.BitLen(); n >= 2048 && n <= 4096 {
			return nil
		}
		return fmt.Errorf("%w: RSA %d bits", ErrCSRKeyUnsupported, k.N.BitLen())
	default:
		return fmt.Errorf("%w: %T", ErrCSRKeyUnsupported, pub)
	}
}
