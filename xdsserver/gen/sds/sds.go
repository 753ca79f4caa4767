// Package sds generates SDS secrets: the TLS credentials a Gateway
// server names in tls.credentialName, as Istio's gateways read them
// ("kubernetes://NAME" for the certificate and key, "NAME-cacert" for
// the CA bundle of a MUTUAL server). A secret carries a private key, so,
// as istiod (which serves SDS only to a VerifiedIdentity), a proxy gets
// credentials only when it authenticated on the TLS port (p.Identity),
// only those of its identity's namespace (Authorize), and only by name:
// a wildcard request gets nothing. A plaintext stream gets nothing at
// all, whatever node it claims.
//
// The output depends on the proxy's identity; SDS is not cached
// (xdstype.Secret); a cache key for it would have to hold the identity.
//
// It imports core and xdsserver/gen, never the serving packages.
package sds

import (
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"

	"github.com/baremesh/baremesh/core/credentials"
	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/xdsserver/gen"
)

// Namespace is the namespace whose credentials proxy p may read: its
// authenticated identity's, else its node's.
func Namespace(p *model.Proxy) string {
	if p.Identity != nil && p.Identity.Namespace != "" {
		return p.Identity.Namespace
	}
	return p.Namespace
}

// Refusal is why a proxy may not read credentials: Reason is a short
// label for metrics (unauthenticated, namespace_mismatch).
type Refusal struct{ reason, detail string }

func (r *Refusal) Error() string  { return r.detail }
func (r *Refusal) Reason() string { return r.reason }

// Authorize says whether proxy p may read gateway credentials: only with
// an authenticated identity (the TLS port), and only its identity's
// namespace's, so the node it claims must be in that namespace too (the
// xDS connect hook already refuses a node outside it). Generate serves
// nothing to a proxy Authorize refuses; the serving edge calls it to
// log and count the refusal.
func Authorize(p *model.Proxy) error {
	if p.Identity == nil {
		return &Refusal{"unauthenticated", "proxy " + p.ID + " is not authenticated: gateway credentials are served only on the TLS port, to a proxy with a certificate or token of their namespace"}
	}
	if p.Identity.Namespace == "" || p.Identity.Namespace != p.Namespace {
		return &Refusal{"namespace_mismatch", "proxy " + p.ID + " in namespace " + p.Namespace + " is authenticated as " + p.Identity.SPIFFEID() + ": credentials are served only to their namespace's identities"}
	}
	return nil
}

// Generate returns the requested secrets that exist, are for the proxy's
// identity's namespace and can be served; others are left out (the
// gateway's LDS leaves out the servers that name them, and
// /debug/configz says why). A proxy Authorize refuses gets nothing.
func Generate(in gen.Input) ([]gen.Resource, error) {
	if Authorize(in.Proxy) != nil {
		return nil, nil
	}
	ns := in.Proxy.Identity.Namespace
	var out []gen.Resource
	for _, name := range in.Names {
		if s := secret(in.Push.Credentials, ns, name); s != nil {
			out = append(out, gen.Resource{Name: name, Resource: s})
		}
	}
	return out, nil
}

// secret is SDS resource name for namespace ns, or nil.
func secret(set *credentials.Set, ns, name string) *tlsv3.Secret {
	base, isCA := strings.CutSuffix(name, credentials.CACertSuffix)
	c, err := set.Lookup(ns, base)
	if err != nil {
		if !isCA {
			return nil
		}
		// A credential may itself end in "-cacert".
		if c, err = set.Lookup(ns, name); err != nil {
			return nil
		}
		isCA = false
	}
	if isCA {
		if len(c.CA) == 0 {
			return nil
		}
		return &tlsv3.Secret{Name: name, Type: &tlsv3.Secret_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
			TrustedCa: inline(c.CA),
		}}}
	}
	if len(c.Cert) == 0 {
		return nil
	}
	return &tlsv3.Secret{Name: name, Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
		CertificateChain: inline(c.Cert), PrivateKey: inline(c.Key),
	}}}
}

func inline(b []byte) *corev3.DataSource {
	return &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: b}}
}
