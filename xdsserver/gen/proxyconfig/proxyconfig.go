// Package proxyconfig generates Istio's dynamic proxy config (type
// istio.mesh.v1alpha1.ProxyConfig, "PCDS"), which Istio's agent asks
// for when it runs with PROXY_CONFIG_XDS_AGENT=true: one unnamed
// resource carrying the mesh's trust bundle in caCertificatesPem. The
// agent adds those roots to the ones it got from the CA and serves the
// merged bundle as ROOTCA (to Envoy over SDS, or in OUTPUT_CERTS'
// root-cert.pem), so a workload trusts peers of another root as soon as
// the mesh config names it, without a restart.
//
// As istiod's (pilot/pkg/xds/pcds.go with pilot/pkg/trustbundle), the
// bundle is the CA's own roots (the snapshot's TrustRoots, root-cert.pem)
// and the PEM entries of the mesh config's caCertificates, each parsed
// and required to be a CA certificate, deduplicated and sorted. Entries
// that name a spiffeBundleUrl instead of a PEM are not fetched (a
// generator does no I/O) and are left out. Like istiod's, only the trust
// bundle is carried; the rest of the proxy config stays what the agent
// read at start.
//
// Generation is pure: snapshot in, one resource out; the output does not
// depend on the proxy. It imports core and xdsserver/gen, never the
// serving packages.
package proxyconfig

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"slices"

	meshv1alpha1 "istio.io/api/mesh/v1alpha1"

	"github.com/baremesh/baremesh/core/push"
	"github.com/baremesh/baremesh/xdsserver/gen"
)

// TypeURL is the type URL of the resource, as the agent asks for it.
const TypeURL = "type.googleapis.com/istio.mesh.v1alpha1.ProxyConfig"

// Generate returns the proxy config with the trust bundle of in.Push.
// A caCertificates entry that is not a PEM CA certificate is an error
// naming the entry and why: the agent then keeps the bundle it has, as
// istiod keeps its previous bundle when an update fails to verify.
func Generate(in gen.Input) ([]gen.Resource, error) {
	roots, err := TrustBundle(in.Push)
	if err != nil {
		return nil, fmt.Errorf("proxyconfig: %w", err)
	}
	return []gen.Resource{{Name: "", Resource: &meshv1alpha1.ProxyConfig{CaCertificatesPem: roots}}}, nil
}

// TrustBundle is the sorted, deduplicated list of root certificates (one
// PEM block each) of snapshot pc: the CA's roots and the mesh config's
// caCertificates PEMs.
func TrustBundle(pc *push.PushContext) ([]string, error) {
	var out []string
	own, err := certs(pc.TrustRoots, "the CA's root-cert.pem")
	if err != nil {
		return nil, err
	}
	out = append(out, own...)
	for i, c := range pc.Mesh.GetCaCertificates() {
		if c.GetPem() == "" {
			continue // a spiffeBundleUrl: not fetched
		}
		what := fmt.Sprintf("mesh config caCertificates[%d]", i)
		if len(c.GetTrustDomains()) > 0 {
			what += fmt.Sprintf(" (trustDomains %v)", c.GetTrustDomains())
		}
		cs, err := certs([]byte(c.GetPem()), what)
		if err != nil {
			return nil, err
		}
		if len(cs) == 0 {
			return nil, fmt.Errorf("%s: no PEM certificate in it", what)
		}
		out = append(out, cs...)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// certs splits data into its CERTIFICATE blocks, re-encoded in one
// canonical form (so one root from two sources is one entry), each
// checked to be a CA certificate.
func certs(data []byte, what string) ([]string, error) {
	var out []string
	for n := 1; ; n++ {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return out, nil
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: PEM block %d: %w", what, n, err)
		}
		if !c.IsCA {
			return nil, fmt.Errorf("%s: PEM block %d (subject %q) is not a CA certificate", what, n, c.Subject.String())
		}
		out = append(out, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: b.Bytes})))
	}
}
