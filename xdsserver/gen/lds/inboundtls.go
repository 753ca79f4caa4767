package lds

import (
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	meshconfig "istio.io/api/mesh/v1alpha1"

	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/scope"
)

// ALPNs Istio's inbound filter chains match on: a sidecar client's
// protocols over mTLS (outbound clusters offer "istio-peer-exchange",
// "istio"; HTTP ones "istio-http/1.1" and the like).
var istioMTLSALPNs = []string{"istio", "istio-peer-exchange", "istio-http/1.0", "istio-http/1.1", "istio-h2"}

// inboundChain is one way a connection to an inbound port is served.
type inboundChain struct {
	transport string   // "tls", "raw_buffer" or "" (any)
	alpn      []string // matched ALPNs
	tls       bool     // terminate Istio mTLS
}

// inboundChainsFor are Istio's inbound filter chains for a port in a
// PeerAuthentication mode: STRICT serves only TLS connections, which
// must present a client certificate; PERMISSIVE tells mTLS from a mesh
// client (TLS with an Istio ALPN), other TLS passed through (TCP ports)
// and plaintext apart, as the TLS inspector sees them; DISABLE serves
// plaintext only.
func inboundChainsFor(mode scope.MTLSMode, http bool) []inboundChain {
	switch mode {
	case scope.MTLSStrict:
		return []inboundChain{{transport: "tls", tls: true}}
	case scope.MTLSDisable:
		return []inboundChain{{transport: "raw_buffer"}}
	}
	if http {
		return []inboundChain{{transport: "tls", alpn: istioMTLSALPNs, tls: true}, {transport: "raw_buffer"}}
	}
	return []inboundChain{{transport: "tls", alpn: istioMTLSALPNs, tls: true}, {transport: "tls"}, {transport: "raw_buffer"}}
}

// istioCiphers are the cipher suites Istio's sidecars accept for mesh
// mTLS (TLS 1.2; TLS 1.3 suites are not configurable).
var istioCiphers = []string{
	"ECDHE-ECDSA-AES256-GCM-SHA384", "ECDHE-RSA-AES256-GCM-SHA384",
	"ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-RSA-AES128-GCM-SHA256",
	"AES256-GCM-SHA384", "AES128-GCM-SHA256",
}

// inboundTLS is the DownstreamTlsContext of Istio's inbound mTLS: the
// workload certificate ("default") and the mesh root ("ROOTCA") from the
// workload's SDS, a client certificate required, and that certificate's
// SPIFFE ID in one of the mesh's trust domains (meshTrustDomainSANs);
// the mesh's meshMTLS cipher suites and minimum version, as istiod's
// BuildInboundTLS.
func inboundTLS(v *scope.View, http bool) *corev3.TransportSocket {
	alpn := []string{"h2", "http/1.1"}
	if !http {
		alpn = []string{"istio-peer-exchange", "h2", "http/1.1"}
	}
	mesh := v.Push.Mesh
	ciphers, minVersion := istioCiphers, tlsv3.TlsParameters_TLSv1_2
	if cs := mesh.GetMeshMTLS().GetCipherSuites(); cs != nil {
		ciphers = cs
	}
	if mesh.GetMeshMTLS().GetMinProtocolVersion() == meshconfig.MeshConfig_TLSConfig_TLSV1_3 {
		minVersion = tlsv3.TlsParameters_TLSv1_3
	}
	sds := gen.WorkloadSDS(v.Proxy)
	ctx := &tlsv3.DownstreamTlsContext{
		RequireClientCertificate: gen.Bool(true),
		CommonTlsContext: &tlsv3.CommonTlsContext{
			AlpnProtocols: alpn,
			TlsParams: &tlsv3.TlsParameters{CipherSuites: ciphers,
				TlsMinimumProtocolVersion: minVersion, TlsMaximumProtocolVersion: tlsv3.TlsParameters_TLSv1_3},
			TlsCertificateSdsSecretConfigs: []*tlsv3.SdsSecretConfig{{Name: gen.SDSDefault, SdsConfig: sds}},
			ValidationContextType: &tlsv3.CommonTlsContext_CombinedValidationContext{CombinedValidationContext: &tlsv3.CommonTlsContext_CombinedCertificateValidationContext{
				DefaultValidationContext:         &tlsv3.CertificateValidationContext{MatchTypedSubjectAltNames: meshTrustDomainSANs(mesh)},
				ValidationContextSdsSecretConfig: &tlsv3.SdsSecretConfig{Name: gen.SDSRootCA, SdsConfig: sds},
			}},
		},
	}
	return &corev3.TransportSocket{Name: "envoy.transport_sockets.tls", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: gen.MustAny(ctx)}}
}

// meshTrustDomainSANs are the SAN matchers an inbound mTLS connection's
// client certificate must meet, as istiod's TrustDomainsForValidation:
// a URI SAN "spiffe://TD/..." for the mesh's trustDomain, its
// trustDomainAliases, and the trust domains of its caCertificates (a
// root added there vouches only for those). Without them the sidecar
// would take a certificate of any trust domain a trusted root signed.
func meshTrustDomainSANs(mesh *meshconfig.MeshConfig) []*tlsv3.SubjectAltNameMatcher {
	tds := append([]string{mesh.GetTrustDomain()}, mesh.GetTrustDomainAliases()...)
	for _, c := range mesh.GetCaCertificates() {
		tds = append(tds, c.GetTrustDomains()...)
	}
	var out []*tlsv3.SubjectAltNameMatcher
	seen := map[string]bool{}
	for _, td := range tds {
		if td == "" || seen[td] {
			continue
		}
		seen[td] = true
		out = append(out, &tlsv3.SubjectAltNameMatcher{SanType: tlsv3.SubjectAltNameMatcher_URI,
			Matcher: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: "spiffe://" + td + "/"}}})
	}
	return out
}

// inboundFilterChains builds the chains of one inbound HTTP or TCP port
// in its PeerAuthentication mode: filters makes the network filters of a
// chain (the same for each).
func inboundFilterChains(v *scope.View, name string, port uint32, mode scope.MTLSMode, http bool, filters func() []*listenerv3.Filter) []*listenerv3.FilterChain {
	var out []*listenerv3.FilterChain
	for _, c := range inboundChainsFor(mode, http) {
		fc := &listenerv3.FilterChain{
			Name: name,
			FilterChainMatch: &listenerv3.FilterChainMatch{DestinationPort: gen.U32(port),
				TransportProtocol: c.transport, ApplicationProtocols: c.alpn},
			Filters: filters(),
		}
		if c.tls {
			fc.TransportSocket = inboundTLS(v, http)
		}
		out = append(out, fc)
	}
	return out
}
