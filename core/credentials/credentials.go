// Package credentials owns the TLS credentials gateways name in a
// Gateway server's tls.credentialName (Istio's Kubernetes Secrets, here
// directories): parsing and checking one credential, the immutable Set
// a snapshot carries, and the lookup rule (a proxy reads only the
// credentials of its own namespace). Reading them from disk is a
// source's job (sources/credentials); serving them is SDS's
// (xdsserver/gen/sds).
//
// It imports nothing of ours.
package credentials

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// File names in a credential's directory, as in a Kubernetes TLS Secret
// (Istio's generic Secret keys cert/key/cacert are accepted too).
const (
	CertFile      = "tls.crt"
	KeyFile       = "tls.key"
	CAFile        = "ca.crt"
	NamespaceFile = "namespaces"
)

// DefaultNamespace is the namespace of a credential with no namespaces
// file: Istio's ingress gateway's, where its users keep gateway Secrets.
const DefaultNamespace = "istio-system"

// CACertSuffix names a credential's CA bundle as a separate SDS resource
// (Istio's "-cacert").
const CACertSuffix = "-cacert"

// Credential is one checked credential.
type Credential struct {
	Name string
	// Namespaces whose proxies may read it.
	Namespaces []string
	// Cert and Key are the PEM certificate chain and private key; CA the
	// PEM bundle clients are verified with (MUTUAL), if any.
	Cert, Key, CA []byte
	// Err says why the credential cannot be served (nil: it can).
	Err error
}

// Parse checks the files of credential name: the certificate and key
// must be PEM and match, the CA bundle (if given) PEM certificates. The
// namespaces file lists namespaces, one per line or space-separated.
func Parse(name string, files map[string][]byte) *Credential {
	c := &Credential{Name: name, Cert: files[CertFile], Key: files[KeyFile], CA: files[CAFile], Namespaces: []string{DefaultNamespace}}
	if ns, ok := files[NamespaceFile]; ok {
		c.Namespaces = strings.Fields(string(ns))
		slices.Sort(c.Namespaces)
		if len(c.Namespaces) == 0 {
			c.Err = fmt.Errorf("%s lists no namespace", NamespaceFile)
			return c
		}
	}
	switch {
	case len(c.Cert) == 0 && len(c.Key) == 0 && len(c.CA) > 0:
		// A CA bundle alone serves MUTUAL's "-cacert" only.
	case len(c.Cert) == 0:
		c.Err = fmt.Errorf("%s is missing or empty", CertFile)
		return c
	case len(c.Key) == 0:
		c.Err = fmt.Errorf("%s is missing or empty", KeyFile)
		return c
	default:
		pair, err := tls.X509KeyPair(c.Cert, c.Key)
		if err != nil {
			c.Err = fmt.Errorf("%s and %s: %v", CertFile, KeyFile, err)
			return c
		}
		if _, err := x509.ParseCertificate(pair.Certificate[0]); err != nil {
			c.Err = fmt.Errorf("%s: %v", CertFile, err)
			return c
		}
	}
	if len(c.CA) > 0 {
		if err := checkCA(c.CA); err != nil {
			c.Err = fmt.Errorf("%s: %v", CAFile, err)
		}
	}
	return c
}

// checkCA requires at least one PEM certificate and nothing else.
func checkCA(b []byte) error {
	n := 0
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			return fmt.Errorf("a %q block where only certificates belong", blk.Type)
		}
		if _, err := x509.ParseCertificate(blk.Bytes); err != nil {
			return fmt.Errorf("certificate %d: %v", n+1, err)
		}
		n++
	}
	if strings.TrimSpace(string(b)) != "" {
		return errors.New("not PEM (text that is not a PEM block)")
	}
	if n == 0 {
		return errors.New("no PEM certificate")
	}
	return nil
}

// Set is the credentials of one snapshot; never altered once made.
type Set struct {
	byName map[string]*Credential
	// Problems are the credentials that cannot be served, by name.
	problems []*Credential
}

// NewSet makes a Set of creds.
func NewSet(creds []*Credential) *Set {
	s := &Set{byName: make(map[string]*Credential, len(creds))}
	for _, c := range creds {
		s.byName[c.Name] = c
		if c.Err != nil {
			s.problems = append(s.problems, c)
		}
	}
	slices.SortFunc(s.problems, func(a, b *Credential) int { return strings.Compare(a.Name, b.Name) })
	return s
}

// Len is how many credentials s holds.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.byName)
}

// Names are the credentials' names, sorted.
func (s *Set) Names() []string {
	if s == nil {
		return nil
	}
	out := make([]string, 0, len(s.byName))
	for n := range s.byName {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Get returns credential name as it is, servable or not.
func (s *Set) Get(name string) (*Credential, bool) {
	if s == nil {
		return nil, false
	}
	c, ok := s.byName[name]
	return c, ok
}

// Problems are the credentials of s that cannot be served.
func (s *Set) Problems() []*Credential {
	if s == nil {
		return nil
	}
	return s.problems
}

// Errors of Lookup.
var (
	ErrNotFound     = errors.New("no such credential")
	ErrNotPermitted = errors.New("the credential is not for this namespace")
)

// Name strips Istio's SDS prefixes ("kubernetes://", "kubernetes-gateway://")
// from a credentialName or an SDS resource name.
func Name(s string) string {
	for _, p := range []string{"kubernetes://", "kubernetes-gateway://"} {
		if rest, ok := strings.CutPrefix(s, p); ok {
			return rest
		}
	}
	return s
}

// Lookup returns credential name for a proxy of namespace: one that
// exists, is for that namespace and can be served; else the reason.
func (s *Set) Lookup(namespace, name string) (*Credential, error) {
	name = Name(name)
	var c *Credential
	if s != nil {
		c = s.byName[name]
		// A Gateway API listener's certificate is named as istiod names
		// it, "kubernetes-gateway://<secret namespace>/<secret name>":
		// the credential of that name (which says which namespaces may
		// use it).
		if _, short, ok := strings.Cut(name, "/"); c == nil && ok {
			c = s.byName[short]
		}
	}
	switch {
	case c == nil:
		return nil, fmt.Errorf("credential %q: %w", name, ErrNotFound)
	case !slices.Contains(c.Namespaces, namespace):
		return nil, fmt.Errorf("credential %q (namespaces %s) for namespace %s: %w", name, strings.Join(c.Namespaces, ","), namespace, ErrNotPermitted)
	case c.Err != nil:
		return nil, fmt.Errorf("credential %q: %v", name, c.Err)
	}
	return c, nil
}

// Usable reports whether a Gateway server naming credentialName can be
// served to a proxy of namespace ns: the certificate and key, and for a
// MUTUAL server the CA bundle too; else why not.
func (s *Set) Usable(ns, credentialName string, mutual bool) error {
	c, err := s.Lookup(ns, credentialName)
	if err != nil {
		return err
	}
	if len(c.Cert) == 0 {
		return fmt.Errorf("credential %q has no %s and %s", c.Name, CertFile, KeyFile)
	}
	if mutual && len(c.CA) == 0 {
		return fmt.Errorf("credential %q has no %s (a MUTUAL server needs it)", c.Name, CAFile)
	}
	return nil
}
