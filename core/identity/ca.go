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
	"slices"
	"sync/atomic"
	"time"
)

// Istio's cacerts file names (istiod's plugged-in CA layout), also used for
// the self-signed CA this package generates.
const (
	CACertFile    = "ca-cert.pem"    // the signing certificate
	CAKeyFile     = "ca-key.pem"     // its private key
	RootCertFile  = "root-cert.pem"  // the root(s) workloads trust
	CertChainFile = "cert-chain.pem" // chain from ca-cert up to the root (optional)
	// RetiredRootsFile holds the roots a rotation retired (ours, not
	// Istio's): certificates chaining to them are refused by name.
	RetiredRootsFile = "retired-roots.pem"
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

// CA signs workload certificates. It is safe for concurrent use. What it
// signs with and trusts is one immutable caState, replaced whole by Reload
// (root rotation: RotatePrepare, RotateActivate, RotateRetire write the
// files; every replica reading them reloads).
type CA struct {
	opts CAOptions
	st   atomic.Pointer[caState]
	// Generated is true when LoadCA created a new self-signed root.
	Generated bool
}

// caState is the CA as read from its files at one moment; never altered.
type caState struct {
	signer crypto.Signer
	cert   *x509.Certificate   // signs leaves
	inter  []*x509.Certificate // intermediates above cert, cert first when it is not a root
	roots  []*x509.Certificate
	// rootPEM is root-cert.pem as read (one or more roots).
	rootPEM []byte
	pool    *x509.CertPool
	// signerRoot is the root cert chains to.
	signerRoot *x509.Certificate
	// retired are the roots RotateRetire dropped (retired-roots.pem):
	// a certificate chaining to one is refused with its own reason.
	retired     []*x509.Certificate
	retiredPool *x509.CertPool
	// files is the content of every file read, to tell a change.
	files []byte
	gen   uint64
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
	st, err := readCA(opts)
	if err != nil {
		return nil, fmt.Errorf("CA %s: %w", opts.Dir, err)
	}
	ca := &CA{opts: opts, Generated: generated}
	st.gen = 1
	ca.st.Store(st)
	return ca, nil
}

// Reload re-reads the CA's files and, when they changed and are good,
// replaces what the CA signs with and trusts; it reports whether it did.
// A bad or half-written set (a key that does not match its certificate
// while a rotation step is being written) is an error and the CA keeps
// its last good state, so the caller retries on its next poll.
func (ca *CA) Reload() (bool, error) {
	old := ca.st.Load()
	_, sum, err := readFiles(ca.opts.Dir)
	if err == nil && bytes.Equal(sum, old.files) {
		return false, nil
	}
	st, err := readCA(ca.opts)
	if err != nil {
		return false, fmt.Errorf("CA %s: reload: %w", ca.opts.Dir, err)
	}
	if bytes.Equal(st.files, old.files) {
		return false, nil
	}
	st.gen = old.gen + 1
	ca.st.Store(st)
	return true, nil
}

// Generation counts the CA's reloads that changed it (1 after LoadCA),
// for callers that derive something from it (the TLS port's certificate,
// remembered verifications).
func (ca *CA) Generation() uint64 { return ca.st.Load().gen }

// caFiles are the files a CA state is read from, in a fixed order.
var caFiles = []string{CACertFile, CAKeyFile, RootCertFile, CertChainFile, RetiredRootsFile}

// readFiles reads the CA's files once (a missing one is absent from the
// map) and concatenates them with their names, to tell a change. A state
// is parsed from this one read, never from a second look at the disk.
func readFiles(dir string) (map[string][]byte, []byte, error) {
	var b bytes.Buffer
	files := map[string][]byte{}
	for _, f := range caFiles {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if errors.Is(err, fs.ErrNotExist) {
			fmt.Fprintf(&b, "%s -\n", f)
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		files[f] = data
		fmt.Fprintf(&b, "%s %d\n", f, len(data))
		b.Write(data)
	}
	return files, b.Bytes(), nil
}

func readCA(opts CAOptions) (*caState, error) {
	files, sum, err := readFiles(opts.Dir)
	if err != nil {
		return nil, err
	}
	ca := &caState{pool: x509.NewCertPool(), retiredPool: x509.NewCertPool(), files: sum}
	certs, err := readCerts(files, CACertFile, true)
	if err != nil {
		return nil, err
	}
	ca.cert = certs[0]
	if ca.signer, err = readKey(files, CAKeyFile); err != nil {
		return nil, err
	}
	if !publicKeysEqual(ca.signer.Public(), ca.cert.PublicKey) {
		return nil, fmt.Errorf("%s does not match %s (different public keys)", CAKeyFile, CACertFile)
	}
	if !ca.cert.IsCA || ca.cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, fmt.Errorf("%s: not a CA certificate (needs basicConstraints CA:true and keyUsage certSign)", CACertFile)
	}
	ca.rootPEM = files[RootCertFile]
	if ca.rootPEM == nil {
		return nil, fmt.Errorf("%s: %w", RootCertFile, fs.ErrNotExist)
	}
	if ca.roots, err = parseCerts(ca.rootPEM, RootCertFile); err != nil {
		return nil, err
	}
	for _, r := range ca.roots {
		ca.pool.AddCert(r)
	}
	chain, err := readCerts(files, CertChainFile, false)
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
	if ca.retired, err = readCerts(files, RetiredRootsFile, false); err != nil {
		return nil, err
	}
	for _, r := range ca.retired {
		ca.retiredPool.AddCert(r)
	}
	now := opts.Now()
	if now.After(ca.cert.NotAfter) {
		return nil, fmt.Errorf("%s expired at %s", CACertFile, ca.cert.NotAfter.UTC().Format(time.RFC3339))
	}
	inter := x509.NewCertPool()
	for _, c := range ca.inter {
		inter.AddCert(c)
	}
	chains, err := ca.cert.Verify(x509.VerifyOptions{Roots: ca.pool, Intermediates: inter, CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	if err != nil {
		return nil, fmt.Errorf("%s does not chain to %s: %w", CACertFile, RootCertFile, err)
	}
	ca.signerRoot = chains[0][len(chains[0])-1]
	return ca, nil
}

func (ca *caState) isRoot(c *x509.Certificate) bool {
	for _, r := range ca.roots {
		if r.Equal(c) {
			return true
		}
	}
	return false
}

// Roots is the pool of trusted roots (root-cert.pem). Callers must not
// alter it.
func (ca *CA) Roots() *x509.CertPool { return ca.st.Load().pool }

// RootPEM returns root-cert.pem as read: every trusted root, the old and
// the new one while a rotation overlaps them. It is the trust bundle
// proxies get (last element of every CSR response, PCDS, vm bootstrap).
func (ca *CA) RootPEM() []byte { return bytes.Clone(ca.st.Load().rootPEM) }

// TrustedRoots returns every trusted root (root-cert.pem), parsed: the
// one read-only accessor for the trust bundle. The slice is the
// caller's; the certificates must not be altered.
func (ca *CA) TrustedRoots() []*x509.Certificate { return slices.Clone(ca.st.Load().roots) }

// SignerRoot is the root the signing certificate chains to (the new root
// once a rotation is activated).
func (ca *CA) SignerRoot() *x509.Certificate { return ca.st.Load().signerRoot }

// Intermediates returns a pool of the certificates between a leaf and the
// root.
func (ca *CA) Intermediates() *x509.CertPool {
	p := x509.NewCertPool()
	for _, c := range ca.st.Load().inter {
		p.AddCert(c)
	}
	return p
}

// Issued is a signed certificate and its chain as Istio's CA service
// returns it: leaf, intermediates..., root-cert.pem last.
type Issued struct {
	Cert  *x509.Certificate
	Chain []string
	// Root is the root Cert chains to; Bundle every root sent with it
	// (root-cert.pem, the chain's last element).
	Root   *x509.Certificate
	Bundle []*x509.Certificate
}

// SignWorkload signs a checked CSR (ParseCSR) for id, valid for ttl from
// now (backdated a minute for clock skew).
func (ca *CA) SignWorkload(csr *x509.CertificateRequest, id ID, ttl time.Duration) (*Issued, error) {
	if err := id.Validate(); err != nil {
		return nil, err
	}
	st := ca.st.Load()
	tmpl := st.leafTemplate(ca.opts.Now(), ttl)
	tmpl.URIs = append(tmpl.URIs, id.URL())
	return st.sign(tmpl, csr.PublicKey)
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
	st := ca.st.Load()
	tmpl := st.leafTemplate(ca.opts.Now(), ttl)
	tmpl.URIs = append(tmpl.URIs, id.URL())
	is, err := st.sign(tmpl, key.Public())
	return is, key, err
}

// SignServer issues a serving certificate for DNS names and IP addresses
// (the TLS listener's), with a fresh ECDSA P-256 key.
func (ca *CA) SignServer(dnsNames []string, ips []net.IP, ttl time.Duration) (*Issued, crypto.Signer, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	st := ca.st.Load()
	tmpl := st.leafTemplate(ca.opts.Now(), ttl)
	tmpl.DNSNames, tmpl.IPAddresses = dnsNames, ips
	if len(dnsNames) > 0 {
		tmpl.Subject = pkix.Name{CommonName: dnsNames[0]}
	}
	is, err := st.sign(tmpl, key.Public())
	return is, key, err
}

func (ca *caState) leafTemplate(now time.Time, ttl time.Duration) *x509.Certificate {
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

func (ca *caState) sign(tmpl *x509.Certificate, pub crypto.PublicKey) (*Issued, error) {
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
	return &Issued{Cert: cert, Chain: chain, Root: ca.signerRoot, Bundle: ca.roots}, nil
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
