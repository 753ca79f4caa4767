package lds

import (
	"slices"
	"testing"

	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	meshv1alpha1 "istio.io/api/mesh/v1alpha1"

	"github.com/baremesh/baremesh/xdsserver/gen/gentest"
)

// TestInboundMTLSChecksTrustDomain: a sidecar's inbound mTLS takes a
// client certificate only if its SPIFFE ID is in one of the mesh's trust
// domains (trustDomain, trustDomainAliases, the trustDomains of
// caCertificates), as istiod's TrustDomainsForValidation; and it uses the
// mesh's meshMTLS cipher suites and minimum version. Found by comparing
// bytes with istiod (internal/load's side-by-side benchmark): every
// inbound chain accepted any certificate a trusted root signed, so a
// root added to caCertificates for one foreign trust domain let that
// domain (or any non-SPIFFE certificate under it) through STRICT.
func TestInboundMTLSChecksTrustDomain(t *testing.T) {
	pc := gentest.MustBuild(t, inboundWorld, peerAuthn("STRICT", ""))
	pc.Mesh.TrustDomain = "example.org"
	pc.Mesh.TrustDomainAliases = []string{"old.example.org", "example.org"}
	pc.Mesh.CaCertificates = []*meshv1alpha1.MeshConfig_CertificateData{{TrustDomains: []string{"partner.io"}}}
	pc.Mesh.MeshMTLS = &meshv1alpha1.MeshConfig_TLSConfig{MinProtocolVersion: meshv1alpha1.MeshConfig_TLSConfig_TLSV1_3, CipherSuites: []string{"ECDHE-ECDSA-AES256-GCM-SHA384"}}
	want := []string{"spiffe://example.org/", "spiffe://old.example.org/", "spiffe://partner.io/"}
	l := webInbound(t, pc)
	n := 0
	for _, fc := range l.GetFilterChains() {
		ts := fc.GetTransportSocket()
		if ts == nil {
			continue
		}
		ctx := &tlsv3.DownstreamTlsContext{}
		if err := ts.GetTypedConfig().UnmarshalTo(ctx); err != nil {
			t.Fatalf("chain %s: %v", fc.GetName(), err)
		}
		n++
		var got []string
		for _, m := range ctx.GetCommonTlsContext().GetCombinedValidationContext().GetDefaultValidationContext().GetMatchTypedSubjectAltNames() {
			if m.GetSanType() != tlsv3.SubjectAltNameMatcher_URI {
				t.Errorf("chain %s: SAN type %v, want URI", fc.GetName(), m.GetSanType())
			}
			got = append(got, m.GetMatcher().GetPrefix())
		}
		if !slices.Equal(got, want) {
			t.Errorf("chain %s: client certificate SAN prefixes %q, want %q", fc.GetName(), got, want)
		}
		p := ctx.GetCommonTlsContext().GetTlsParams()
		if p.GetTlsMinimumProtocolVersion() != tlsv3.TlsParameters_TLSv1_3 || !slices.Equal(p.GetCipherSuites(), []string{"ECDHE-ECDSA-AES256-GCM-SHA384"}) {
			t.Errorf("chain %s: TLS params %v, want meshMTLS's", fc.GetName(), p)
		}
	}
	if n == 0 {
		t.Fatal("no inbound chain terminates mTLS")
	}
}
