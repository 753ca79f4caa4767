package identity

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Istio's cacerts file names (istiod's plugged-in CA layout), also used for
// the self-signed CA this package generates.
const (
	CACertFile    = "ca-cert.pem"    // the signing certificate
	CAKeyFile     = "ca-key.pem"     // its private key
	RootCertFile  = "root-cert.pem"  // the root(s) workloads trust
	CertChainFile = "cert-chain.pem" // chain from ca-cert up to the root (optional)
)

// DefaultWorkloadTTL is a workload certificate's lifetime when the request
// does not ask for one.
const DefaultWorkloadTTL = 24 * time.Hour

// CAOptions say where the CA's files are and whether it may create them.
type CAOptions struct {
	// Dir holds the four files of Istio's cacerts layout.
	Dir string
	// Plugged: the files were provided by an operator (Istio's cacerts);
	// they must all be present and are never written. Otherwise a missing
	// CA is generated in Dir (self-signed root, directory 0700, key 0600)
	// and reused after restarts.
	Plugged bool
	// Organization for a generated root's subject (e.g. the trust domain).
	Organization string
	// Now is the clock (tests); nil means time.Now.
	Now func() time.Time
}

// CA signs workload certificates. It is safe for concurrent use and never
// changes after LoadCA.
type CA struct {
	signer crypto.Signer
	cert   *x509.Certificate   // signs leaves
	inter  []*x509.Certificate // intermediates above cert, cert first when it is not a root
	roots  []*x509.Certificate
	// RootPEM is root-cert.pem as read (one or more roots).
	rootPEM []byte
	pool    *x509.CertPool
	now     func() time.Time
	// Generated is true when LoadCA created a new self-signed root.
	Generated bool
}

// LoadCA reads the CA from opts.Dir, generating a self-signed one there
// when the directory holds none and opts.Plugged is false. Errors name the
// file and the reason; a key that does not match its certificate, a
// certificate that is not a CA or does not chain to root-cert.pem, and an
// unreadable directory are errors.
func LoadCA(opts CAOptions) (*CA, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	certPath, keyPath := filepath.Join(opts.Dir, CACertFile), filepath.Join(opts.Dir, CAKeyFile)
	_, certErr := os.Stat(certPath)
	_, keyErr := os.Stat(keyPath)
	generated := false
	switch {
	case certErr == nil && keyErr == nil:
	case opts.Plugged:
		return nil, fmt.Errorf("CA %s: Istio cacerts layout wants %s, %s, %s (and optionally %s): %w",
			opts.Dir, CACertFile, CAKeyFile, RootCertFile, CertChainFile, errors.Join(certErr, keyErr))
	case errors.Is(certErr, fs.ErrNotExist) && errors.Is(keyErr, fs.ErrNotExist):
		if err := generateRoot(opts); err != nil {
			return nil, fmt.Errorf("CA %s: generate self-signed root: %w", opts.Dir, err)
		}
		generated = true
	default:
		return nil, fmt.Errorf("CA %s: %w", opts.Dir, errors.Join(certErr, keyErr))
	}
	ca, err := readCA(opts)
	if err != nil {
		return nil, fmt.Errorf("CA %s: %w", opts.Dir, err)
	}
	ca.Generated = generated
	return ca, nil
}

func readCA(opts CAOptions) (*CA, error) {
	ca := &CA{now: opts.Now, pool: x509.NewCertPool()}
	certs, err := readCerts(filepath.Join(opts.Dir, CACertFile), true)
	if err != nil {
		return nil, err
	}
	ca.cert = certs[0]
	if ca.signer, err = readKey(filepath.Join(opts.Dir, CAKeyFile)); err != nil {
		return nil, err
	}
	if !publicKeysEqual(ca.signer.Public(), ca.cert.PublicKey) {
		return nil, fmt.Errorf("%s does not match %s (different public keys)", CAKeyFile, CACertFile)
	}
	if !ca.cert.IsCA || ca.cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, fmt.Errorf("%s: not a CA certificate (needs basicConstraints CA:true and keyUsage certSign)", CACertFile)
	}
	if ca.rootPEM, err = os.ReadFile(filepath.Join(opts.Dir, RootCertFile)); err != nil {
		return nil, err
	}
	if ca.roots, err = parseCerts(ca.rootPEM, RootCertFile); err != nil {
		return nil, err
	}
	for _, r := range ca.roots {
		ca.pool.AddCert(r)
	}
	chain, err := readCerts(filepath.Join(opts.Dir, CertChainFile), false)
	if err != nil {
		return nil, err
	}
	if !ca.isRoot(ca.cert) {
		ca.inter = append(ca.inter, ca.cert)
	}
	for _, c := range chain {
		if !c.Equal(ca.cert) && !ca.isRoot(c) {
			ca.inter = append(ca.inter, c)
		}
	}
	now := ca.now()
	if now.After(ca.cert.NotAfter) {
		return nil, fmt.Errorf("%s expired at %s", CACertFile, ca.cert.NotAfter.UTC().Format(time.RFC3339))
	}
	inter := x509.NewCertPool()
	for _, c := range ca.inter {
		inter.AddCert(c)
	}
	if _, err := ca.cert.Verify(x509.VerifyOptions{Roots: ca.pool, Intermediates: inter, CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return nil, fmt.Errorf("%s does not chain to %s: %w", CACertFile, RootCertFile, err)
	}
	return ca, nil
}

func (ca *CA) isRoot(c *x509.Certificate) bool {
	for _, r := range ca.roots {
		if r.Equal(c) {
			return true
		}
	}
	return false
}

// Roots is the pool of trusted roots (root-cert.pem). Callers must not
// alter it.
func (ca *CA) Roots() *x509.CertPool { return ca.pool }

// RootPEM returns root-cert.pem as read.
func (ca *CA) RootPEM() []byte { return bytes.Clone(ca.rootPEM) }

// Intermediates returns a pool of the certificates between a leaf and the
// root.
func (ca *CA) Intermediates() *x509.CertPool {
	p := x509.NewCertPool()
	for _, c := range ca.inter {
		p.AddCert(c)
	}
	return p
}

// Issued is a signed certificate and its chain as Istio's CA service
// returns it: leaf, intermediates..., root-cert.pem last.
type Issued struct {
	Cert  *x509.Certificate
	Chain []string
}

// SignWorkload signs a checked CSR (ParseCSR) for id, valid for ttl from
// now (backdated a minute for clock skew).
func (ca *CA) SignWorkload(csr *x509.CertificateRequest, id ID, ttl time.Duration) (*Issued, error) {
	if err := id.Validate(); err != nil {
		return nil, err
	}
	tmpl := ca.leafTemplate(ttl)
	tmpl.URIs = append(tmpl.URIs, id.URL())
	return ca.sign(tmpl, csr.PublicKey)
}

// IssueWorkload issues a workload certificate for id with a fresh ECDSA
// P-256 key, without a CSR: for callers that hold the CA themselves (tests
// and tools on the control host), as SignServer does for the listener.
func (ca *CA) IssueWorkload(id ID, ttl time.Duration) (*Issued, crypto.Signer, error) {
	if err := id.Validate(); err != nil {
		return nil, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := ca.leafTemplate(ttl)
	tmpl.URIs = append(tmpl.URIs, id.URL())
	is, err := ca.sign(tmpl, key.Public())
	return is, key, err
}

// SignServer issues a serving certificate for DNS names and IP addresses
// (the TLS listener's), with a fresh ECDSA P-256 key.
func (ca *CA) SignServer(dnsNames []string, ips []net.IP, ttl time.Duration) (*Issued, crypto.Signer, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := ca.leafTemplate(ttl)
	tmpl.DNSNames, tmpl.IPAddresses = dnsNames, ips
	if len(dnsNames) > 0 {
		tmpl.Subject = pkix.Name{CommonName: dnsNames[0]}
	}
	is, err := ca.sign(tmpl, key.Public())
	return is, key, err
}

func (ca *CA) leafTemplate(ttl time.Duration) *x509.Certificate {
	now := ca.now()
	notAfter := now.Add(ttl)
	if notAfter.After(ca.cert.NotAfter) {
		notAfter = ca.cert.NotAfter // never outlive the signer
	}
	return &x509.Certificate{
		SerialNumber:          randomSerial(),
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
	}
}

func (ca *CA) sign(tmpl *x509.Certificate, pub crypto.PublicKey) (*Issued, error) {
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, pub, ca.signer)
	if err != nil {
		return nil, fmt.Errorf("sign: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("sign: %w", err)
	}
	chain := []string{encodeCert(cert)}
	for _, c := range ca.inter {
		chain = append(chain, encodeCert(c))
	}
	chain = append(chain, string(ca.rootPEM))
	return &Issued{Cert: cert, Chain: chain}, nil
}

func encodeCert(c *x509.Certificate) string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw}))
}

func randomSerial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return n.Add(n, big.NewInt(1))
}

func publicKeysEqual(a, b crypto.PublicKey) bool {
	k, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && k.Equal(b)
}
