package identity

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// ID is a workload's SPIFFE identity in Istio's form,
// spiffe://<trustDomain>/ns/<namespace>/sa/<serviceAccount>.
type ID struct {
	TrustDomain    string
	Namespace      string
	ServiceAccount string
}

// ErrBadSPIFFEID reports a URI that is not an Istio SPIFFE ID.
var ErrBadSPIFFEID = errors.New("not a SPIFFE ID of the form spiffe://TRUST_DOMAIN/ns/NAMESPACE/sa/SERVICE_ACCOUNT")

const spiffeScheme = "spiffe"

// String formats the ID as a URI.
func (id ID) String() string {
	return spiffeScheme + "://" + id.TrustDomain + "/ns/" + id.Namespace + "/sa/" + id.ServiceAccount
}

// URL returns the ID as a *url.URL (for certificate URI SANs).
func (id ID) URL() *url.URL {
	return &url.URL{Scheme: spiffeScheme, Host: id.TrustDomain, Path: "/ns/" + id.Namespace + "/sa/" + id.ServiceAccount}
}

// SameWorkload reports whether two IDs name the same namespace and service
// account (trust domains aside).
func (id ID) SameWorkload(o ID) bool {
	return id.Namespace == o.Namespace && id.ServiceAccount == o.ServiceAccount
}

// ParseID reads spiffe://TD/ns/NS/sa/SA.
func ParseID(s string) (ID, error) {
	u, err := url.Parse(s)
	if err != nil {
		return ID{}, fmt.Errorf("%q: %w", s, ErrBadSPIFFEID)
	}
	return IDFromURL(u)
}

// IDFromURL reads a parsed URI SAN.
func IDFromURL(u *url.URL) (ID, error) {
	if u == nil || u.Scheme != spiffeScheme || u.Host == "" || u.User != nil || u.Port() != "" ||
		u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return ID{}, fmt.Errorf("%q: %w", u.String(), ErrBadSPIFFEID)
	}
	parts := strings.Split(u.Path, "/")
	if len(parts) != 5 || parts[0] != "" || parts[1] != "ns" || parts[3] != "sa" || parts[2] == "" || parts[4] == "" {
		return ID{}, fmt.Errorf("%q: %w", u.String(), ErrBadSPIFFEID)
	}
	id := ID{TrustDomain: u.Host, Namespace: parts[2], ServiceAccount: parts[4]}
	if err := id.Validate(); err != nil {
		return ID{}, fmt.Errorf("%q: %w", u.String(), err)
	}
	return id, nil
}

// Validate checks that each part is a DNS-1123-ish name (trust domain: DNS
// name; namespace and service account: label/subdomain characters).
func (id ID) Validate() error {
	if !validName(id.TrustDomain, true) {
		return fmt.Errorf("trust domain %q: %w", id.TrustDomain, ErrBadSPIFFEID)
	}
	if !validName(id.Namespace, false) {
		return fmt.Errorf("namespace %q: %w", id.Namespace, ErrBadSPIFFEID)
	}
	if !validName(id.ServiceAccount, true) {
		return fmt.Errorf("service account %q: %w", id.ServiceAccount, ErrBadSPIFFEID)
	}
	return nil
}

// validName accepts lower-case letters, digits, '-' and (when dots) '.',
// 1-253 characters, starting and ending with a letter or digit.
func validName(s string, dots bool) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case c == '-' && i > 0 && i < len(s)-1:
		case c == '.' && dots && i > 0 && i < len(s)-1:
		default:
			return false
		}
	}
	return true
}
