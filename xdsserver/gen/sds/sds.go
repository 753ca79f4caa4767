// Package sds generates SDS secrets: the TLS credentials a Gateway
// server names in tls.credentialName, as Istio's gateways read them
// ("kubernetes://NAME" for the certificate and key, "NAME-cacert" for
// the CA bundle of a MUTUAL server). A proxy gets only credentials of
// its own namespace (its authenticated identity's when it has one), and
// only by name: a wildcard request gets nothing.
//
// It imports core and xdsserver/gen, never the serving packages.
package sds

import (
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"

	"github.com/baremesh/baremesh/core/credentials"
	"github.com/baremesh/baremesh/xdsserver/gen"
)

// Namespace is the namespace whose credentials proxy p may read: its
// authenticated identity's, else its node's.
func Namespace(p *gen.Proxy) string {
	if p.Identity != nil && p.Identity.Namespace != "" {
		return p.Identity.Namespace
	}
	return p.Namespace
}

// Generate returns the requested secrets that exist, are for the proxy's
// namespace and can be served; others are left out (the gateway's LDS
// leaves out the servers that name them, and /debug/configz says why).
func Generate(in gen.Input) ([]gen.Resource, error) {
	ns := Namespace(in.Proxy)
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
