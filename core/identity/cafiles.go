package identity

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// RootTTL is a generated root's lifetime (as istiod's self-signed root).
const RootTTL = 10 * 365 * 24 * time.Hour

// generateRoot writes a self-signed ECDSA P-256 root into opts.Dir as
// ca-cert.pem, ca-key.pem (0600) and root-cert.pem. The key is written
// first, the signing certificate last, so a crash leaves no certificate
// without its key.
func generateRoot(opts CAOptions) error {
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := opts.Now()
	org := opts.Organization
	if org == "" {
		org = "baremesh"
	}
	tmpl := &x509.Certificate{
		SerialNumber:          randomSerial(),
		Subject:               pkix.Name{Organization: []string{org}, CommonName: "baremesh root CA"},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(RootTTL),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	for _, f := range []struct {
		name string
		data []byte
		mode os.FileMode
	}{
		{CAKeyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600},
		{RootCertFile, certPEM, 0o644},
		{CACertFile, certPEM, 0o600},
	} {
		if err := WriteFileAtomic(filepath.Join(opts.Dir, f.name), f.data, f.mode); err != nil {
			return err
		}
	}
	return nil
}

// WriteFileAtomic writes data to a temporary file beside path, syncs it and
// renames it over path.
func WriteFileAtomic(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// readCerts parses a PEM file of certificates read into files (nil when
// missing); a missing or empty optional file is no certificates.
func readCerts(files map[string][]byte, name string, required bool) ([]*x509.Certificate, error) {
	data, ok := files[name]
	if !ok && required {
		return nil, fmt.Errorf("%s: %w", name, fs.ErrNotExist)
	}
	if !required && len(data) == 0 {
		return nil, nil
	}
	return parseCerts(data, name)
}

func parseCerts(data []byte, name string) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for n := 1; ; n++ {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: certificate %d: %w", name, n, err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no PEM certificate", name)
	}
	return out, nil
}

// readKey parses a PEM private key (PKCS#8, PKCS#1 RSA or SEC 1 EC) read
// into files.
func readKey(files map[string][]byte, name string) (crypto.Signer, error) {
	data, ok := files[name]
	if !ok {
		return nil, fmt.Errorf("%s: %w", name, fs.ErrNotExist)
	}
	var err error
	b, _ := pem.Decode(data)
	if b == nil {
		return nil, fmt.Errorf("%s: no PEM block", name)
	}
	var k any
	switch b.Type {
	case "PRIVATE KEY":
		k, err = x509.ParsePKCS8PrivateKey(b.Bytes)
	case "RSA PRIVATE KEY":
		k, err = x509.ParsePKCS1PrivateKey(b.Bytes)
	case "EC PRIVATE KEY":
		k, err = x509.ParseECPrivateKey(b.Bytes)
	default:
		return nil, fmt.Errorf("%s: PEM block %q is not a private key", name, b.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	s, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("%s: key type %T cannot sign", name, k)
	}
	return s, nil
}
