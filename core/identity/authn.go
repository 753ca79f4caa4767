package identity

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// Credentials is what a connection offers to prove who is calling, as the
// serving edge took it from the transport (no gRPC types here).
type Credentials struct {
	// PeerCertificates is the client's TLS chain, leaf first, as presented
	// (not yet verified: the listener requests a certificate without
	// checking it, so that a bad one is refused here with a reason).
	PeerCertificates []*x509.Certificate
	// BearerToken is the token of an "authorization: Bearer <token>" header.
	BearerToken string
	// Peer is the remote address, for logs.
	Peer string
	// ClusterID is the Kubernetes cluster the caller says it runs in (the
	// "clusterid" header Istio's agent sends), to choose where its service
	// account token is reviewed; "" when not sent.
	ClusterID string
}

// Method names how a caller was authenticated.
const (
	MethodToken      = "token"
	MethodClientCert = "client-cert"
	// MethodKubeToken: a Kubernetes service account token, reviewed by
	// the cluster that issued it (TokenReview).
	MethodKubeToken = "kube-token"
)

// Caller is an authenticated caller.
type Caller struct {
	ID ID
	// Method is MethodToken, MethodClientCert or MethodKubeToken.
	Method string
	// Detail says with what: the token's ID, the client certificate's
	// serial number in hex, or the cluster that reviewed a Kubernetes token.
	Detail string
	// Group is the WorkloadGroup a join token names ("" otherwise).
	Group string
}

// Authenticator decides who a caller is. Implementations are safe for
// concurrent use. An authenticator that finds nothing it checks in creds
// returns an error that Is ErrNoCredentials, so that a Chain tries the
// next one.
type Authenticator interface {
	Authenticate(ctx context.Context, creds Credentials) (*Caller, error)
}

// Authentication errors. Each is permanent for the credential that caused
// it (retrying the same credential cannot succeed), except
// ErrTokenStore, which is the server's own trouble.
var (
	ErrNoCredentials = errors.New("no credentials (neither a client certificate nor a bearer token)")
	ErrCertUntrusted = errors.New("client certificate not issued by this mesh's CA")
	ErrCertExpired   = errors.New("client certificate expired or not yet valid")
	// ErrCertRetiredRoot: the certificate chains to a root that a
	// rotation retired (the proxy was away for the whole rotation).
	ErrCertRetiredRoot  = errors.New("client certificate signed by a retired root; re-bootstrap this workload with a join token (baremeshctl vm bootstrap)")
	ErrCertNoIdentity   = errors.New("client certificate carries no SPIFFE identity")
	ErrTokenMalformed   = errors.New("join token malformed")
	ErrTokenUnknown     = errors.New("join token unknown")
	ErrTokenBadSecret   = errors.New("join token secret does not match (forged or mistyped)")
	ErrTokenExpired     = errors.New("join token expired")
	ErrTokenRevoked     = errors.New("join token revoked")
	ErrTokenUsedUp      = errors.New("join token used up")
	ErrTokenStore       = errors.New("join token store unavailable")
	ErrIdentityMismatch = errors.New("requested identity differs from the caller's")
	// Kubernetes service account tokens (sources/kube reviews them).
	ErrKubeTokenInvalid   = errors.New("Kubernetes token not authenticated by its cluster")
	ErrKubeTokenAudience  = errors.New("Kubernetes token not for this CA's audience")
	ErrKubeTokenNotSA     = errors.New("Kubernetes token is not a service account's")
	ErrKubeClusterUnknown = errors.New("Kubernetes cluster unknown")
	ErrKubeReviewFailed   = errors.New("Kubernetes TokenReview failed (API server unreachable or refused the review)")
)

// Retryable reports whether err is the server's own trouble (a join token
// store or a Kubernetes API server unavailable), so that the same
// credential may succeed later.
func Retryable(err error) bool {
	return errors.Is(err, ErrTokenStore) || errors.Is(err, ErrKubeReviewFailed)
}

// LooksLikeJWT reports whether a bearer token has a JWT's form: three
// dot-separated base64url parts whose first decodes to a JSON object (a
// join token starts with "bmt1." and its first part is not base64url
// JSON). Nothing is verified.
func LooksLikeJWT(s string) bool {
	parts := strings.Split(s, ".")
	if len(parts) != 3 || parts[0] == tokenPrefix || parts[1] == "" || parts[2] == "" {
		return false
	}
	h, err := base64.RawURLEncoding.DecodeString(parts[0])
	return err == nil && len(h) > 1 && h[0] == '{' && h[len(h)-1] == '}'
}

// reasons maps each error to a short metric label, most specific first:
// when a Chain joins errors, the first listed that matches wins.
var reasons = []struct {
	err    error
	reason string
}{
	{ErrKubeReviewFailed, "kube_review_failed"},
	{ErrKubeClusterUnknown, "kube_cluster_unknown"},
	{ErrKubeTokenAudience, "kube_token_audience"},
	{ErrKubeTokenNotSA, "kube_token_not_sa"},
	{ErrKubeTokenInvalid, "kube_token_invalid"},
	{ErrTokenExpired, "token_expired"},
	{ErrTokenRevoked, "token_revoked"},
	{ErrTokenUsedUp, "token_used_up"},
	{ErrTokenBadSecret, "token_bad_secret"},
	{ErrTokenUnknown, "token_unknown"},
	{ErrTokenMalformed, "token_malformed"},
	{ErrTokenStore, "token_store"},
	{ErrCertExpired, "cert_expired"},
	{ErrCertRetiredRoot, "cert_retired_root"},
	{ErrCertUntrusted, "cert_untrusted"},
	{ErrCertNoIdentity, "cert_no_identity"},
	{ErrNoCredentials, "no_credentials"},
	{ErrIdentityMismatch, "identity_mismatch"},
	{ErrCSRTooLarge, "csr_too_large"},
	{ErrCSRKeyUnsupported, "csr_key_unsupported"},
	{ErrCSRIdentity, "csr_identity"},
	{ErrCSRInvalid, "csr_invalid"},
}

// Reason returns a short label for an error of this package ("other" for
// anything else), for metrics.
func Reason(err error) string {
	for _, r := range reasons {
		if errors.Is(err, r.err) {
			return r.reason
		}
	}
	return "other"
}

// IsAuthError reports whether err is an authentication failure (as opposed
// to a bad request or the server's own trouble).
func IsAuthError(err error) bool {
	for _, e := range []error{ErrNoCredentials, ErrCertUntrusted, ErrCertExpired, ErrCertRetiredRoot, ErrCertNoIdentity, ErrTokenMalformed,
		ErrTokenUnknown, ErrTokenBadSecret, ErrTokenExpired, ErrTokenRevoked, ErrTokenUsedUp,
		ErrKubeTokenInvalid, ErrKubeTokenAudience, ErrKubeTokenNotSA, ErrKubeClusterUnknown} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// Chain tries authenticators in order and returns the first success. The
// client certificate should come first: it costs nothing, while a join
// token with a use count is spent when it authenticates.
type Chain []Authenticator

// Authenticate implements Authenticator. When none succeeds the error
// joins every failure except "no credentials".
func (c Chain) Authenticate(ctx context.Context, creds Credentials) (*Caller, error) {
	var errs []error
	for _, a := range c {
		caller, err := a.Authenticate(ctx, creds)
		if err == nil {
			return caller, nil
		}
		if !errors.Is(err, ErrNoCredentials) {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		return nil, ErrNoCredentials
	}
	return nil, errors.Join(errs...)
}

// CertAuthenticator accepts a client certificate issued by the CA (the
// renewal path: a workload holding a valid certificate is that identity).
// A verified chain is remembered until its first certificate expires,
// so the streams of one connection (and a proxy's reconnects) verify it
// once: verification is deterministic for a chain, the CA's roots and
// the time (a remembered one is dropped when the CA reloads: a rotation
// step changes the roots).
type CertAuthenticator struct {
	CA  *CA
	Now func() time.Time // nil: time.Now

	mu       sync.Mutex
	verified map[[sha256.Size]byte]verifiedChain
}

// verifiedChain is a remembered verification.
type verifiedChain struct {
	caller   Caller
	notAfter time.Time
	gen      uint64 // the CA's Generation it was verified under
}

// maxVerified bounds the remembered chains (the map is emptied when full).
const maxVerified = 8192

var _ Authenticator = (*CertAuthenticator)(nil)

// Authenticate implements Authenticator.
func (a *CertAuthenticator) Authenticate(_ context.Context, creds Credentials) (*Caller, error) {
	if len(creds.PeerCertificates) == 0 {
		return nil, ErrNoCredentials
	}
	now := time.Now
	if a.Now != nil {
		now = a.Now
	}
	h := sha256.New()
	notAfter := creds.PeerCertificates[0].NotAfter
	for _, c := range creds.PeerCertificates {
		h.Write(c.Raw)
		if c.NotAfter.Before(notAfter) {
			notAfter = c.NotAfter
		}
	}
	var key [sha256.Size]byte
	h.Sum(key[:0])
	a.mu.Lock()
	v, ok := a.verified[key]
	a.mu.Unlock()
	gen := a.CA.Generation()
	if ok && v.gen == gen && now().Before(v.notAfter) {
		c := v.caller
		return &c, nil
	}
	caller, err := a.verify(creds, now)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	if a.verified == nil || len(a.verified) >= maxVerified {
		a.verified = map[[sha256.Size]byte]verifiedChain{}
	}
	a.verified[key] = verifiedChain{caller: *caller, notAfter: notAfter, gen: gen}
	a.mu.Unlock()
	return caller, nil
}

// verify checks a client chain against the CA.
func (a *CertAuthenticator) verify(creds Credentials, now func() time.Time) (*Caller, error) {
	leaf := creds.PeerCertificates[0]
	st := a.CA.st.Load()
	inter := x509.NewCertPool()
	for _, c := range st.inter {
		inter.AddCert(c)
	}
	for _, c := range creds.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	opts := x509.VerifyOptions{Roots: st.pool, Intermediates: inter, CurrentTime: now(),
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if _, err := leaf.Verify(opts); err != nil {
		if len(st.retired) > 0 {
			// Retired first, even when also expired: what to do is the
			// same (re-bootstrap), and the reason says why. Checked at a
			// time the leaf was valid, so an expired one is recognised.
			ropts := opts
			ropts.Roots, ropts.CurrentTime = st.retiredPool, leaf.NotBefore.Add(time.Second)
			if chains, rerr := leaf.Verify(ropts); rerr == nil {
				r := chains[0][len(chains[0])-1]
				return nil, fmt.Errorf("%w: serial %s (valid until %s) chains to %q (SHA-256 %s)", ErrCertRetiredRoot,
					leaf.SerialNumber.Text(16), leaf.NotAfter.UTC().Format(time.RFC3339), r.Subject.String(), Fingerprint(r))
			}
		}
		var inv x509.CertificateInvalidError
		if errors.As(err, &inv) && inv.Reason == x509.Expired {
			return nil, fmt.Errorf("%w: serial %s: %v", ErrCertExpired, leaf.SerialNumber.Text(16), err)
		}
		return nil, fmt.Errorf("%w: %v", ErrCertUntrusted, err)
	}
	if len(leaf.URIs) != 1 {
		return nil, fmt.Errorf("%w: %d URI SANs", ErrCertNoIdentity, len(leaf.URIs))
	}
	id, err := IDFromURL(leaf.URIs[0])
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCertNoIdentity, err)
	}
	return &Caller{ID: id, Method: MethodClientCert, Detail: leaf.SerialNumber.Text(16)}, nil
}
