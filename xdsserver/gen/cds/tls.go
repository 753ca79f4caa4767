package cds

import (
	"slices"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rawbufferv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/raw_buffer/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/structpb"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/scope"
)

const tlsSocketName = "envoy.transport_sockets.tls"

// applyTLS sets a cluster's upstream TLS as Istio does: the
// DestinationRule's tls when given; else, for a sidecar or gateway with
// auto mTLS on (meshConfig enableAutoMtls, the default), a service inside
// the mesh whose namespace is not PeerAuthentication DISABLE, and a
// cluster with endpoints of its own (not ORIGINAL_DST): Istio mTLS to
// endpoints labelled security.istio.io/tlsMode=istio (EDS carries the
// label as transport socket match metadata), plaintext to the others.
func applyTLS(c *clusterv3.Cluster, v *scope.View, svc *model.Service, p model.Port, subset string, t *networking.ClientTLSSettings, h2 bool) {
	if t != nil {
		c.TransportSocket = transportSocket(v, svc, p, subset, t, h2)
		if c.TransportSocket != nil && (t.GetMode() == networking.ClientTLSSettings_SIMPLE || t.GetMode() == networking.ClientTLSSettings_MUTUAL) {
			autoSNI(c, t)
		}
		return
	}
	if !autoMTLS(v, svc) || c.GetType() == clusterv3.Cluster_ORIGINAL_DST {
		return
	}
	mtls := transportSocket(v, svc, p, subset, autoMTLSSettings, h2)
	c.TransportSocketMatches = []*clusterv3.Cluster_TransportSocketMatch{
		{Name: "tlsMode-istio", Match: tlsModeIstio, TransportSocket: mtls},
		plaintextMatch,
	}
}

// Shared, never altered: every auto mTLS cluster has them.
var (
	autoMTLSSettings = &networking.ClientTLSSettings{Mode: networking.ClientTLSSettings_ISTIO_MUTUAL}
	tlsModeIstio     = &structpb.Struct{Fields: map[string]*structpb.Value{"tlsMode": structpb.NewStringValue("istio")}}
	plaintextMatch   = &clusterv3.Cluster_TransportSocketMatch{Name: "tlsMode-disabled", Match: &structpb.Struct{},
		TransportSocket: &corev3.TransportSocket{Name: "envoy.transport_sockets.raw_buffer",
			ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: gen.MustAny(&rawbufferv3.RawBuffer{})}}}
	istioTLSParams = &tlsv3.TlsParameters{TlsMinimumProtocolVersion: tlsv3.TlsParameters_TLSv1_2, TlsMaximumProtocolVersion: tlsv3.TlsParameters_TLSv1_3}
	// ALPN of Istio mTLS; an HTTP/2 cluster adds h2 (istiod's
	// ALPNInMeshH2WithMxc), so the server side need not guess the
	// protocol, and a DestinationRule's SIMPLE or MUTUAL TLS offers h2 alone.
	istioALPN   = []string{"istio-peer-exchange", "istio"}
	istioALPNH2 = []string{"istio-peer-exchange", "istio", "h2"}
	alpnH2      = []string{"h2"}
	// Istio's SDS secrets, from the agent or over ADS (gen.WorkloadSDS).
	agentDefault, agentRoot = sdsSecrets(&model.Proxy{IstioVersion: "agent"})
	adsDefault, adsRoot     = sdsSecrets(&model.Proxy{})
)

func sdsSecrets(p *model.Proxy) (def []*tlsv3.SdsSecretConfig, root *tlsv3.SdsSecretConfig) {
	sds := gen.WorkloadSDS(p)
	return []*tlsv3.SdsSecretConfig{{Name: gen.SDSDefault, SdsConfig: sds}}, &tlsv3.SdsSecretConfig{Name: gen.SDSRootCA, SdsConfig: sds}
}

func autoMTLS(v *scope.View, svc *model.Service) bool {
	if svc.MeshExternal {
		return false
	}
	if m := v.Push.Mesh; m != nil && m.GetEnableAutoMtls() != nil && !m.GetEnableAutoMtls().GetValue() {
		return false
	}
	return scope.ServiceMTLS(v.Push, svc.Namespace) != scope.MTLSDisable
}

// TLSModeLabel is the endpoint label auto mTLS keys on; the EDS
// generator copies it into the endpoint's transport socket match
// metadata.
const TLSModeLabel = "security.istio.io/tlsMode"

// transportSocket builds the UpstreamTlsContext for a DestinationRule's
// TLS mode; nil for DISABLE.
func transportSocket(v *scope.View, svc *model.Service, p model.Port, subset string, t *networking.ClientTLSSettings, h2 bool) *corev3.TransportSocket {
	var ctx *tlsv3.UpstreamTlsContext
	switch t.GetMode() {
	case networking.ClientTLSSettings_SIMPLE, networking.ClientTLSSettings_MUTUAL:
		ctx = originationTLS(v, svc, p, t, h2)
	case networking.ClientTLSSettings_ISTIO_MUTUAL:
		def, root := adsDefault, adsRoot
		if v.Proxy.IstioVersion != "" {
			def, root = agentDefault, agentRoot
		}
		sni := t.GetSni()
		if sni == "" {
			sni = "outbound_." + gen.PortName(p.Number) + "_." + subset + "_." + svc.Hostname
		}
		names := t.GetSubjectAltNames()
		if len(names) == 0 {
			names = serviceIdentities(v, svc)
		}
		vc := &tlsv3.CertificateValidationContext{MatchTypedSubjectAltNames: sans(names)}
		if t.GetInsecureSkipVerify().GetValue() {
			vc = &tlsv3.CertificateValidationContext{}
		}
		alpn := istioALPN
		if h2 {
			alpn = istioALPNH2
		}
		ctx = &tlsv3.UpstreamTlsContext{Sni: sni, CommonTlsContext: &tlsv3.CommonTlsContext{
			TlsParams:                      istioTLSParams,
			AlpnProtocols:                  alpn,
			TlsCertificateSdsSecretConfigs: def,
			ValidationContextType: &tlsv3.CommonTlsContext_CombinedValidationContext{CombinedValidationContext: &tlsv3.CommonTlsContext_CombinedCertificateValidationContext{
				DefaultValidationContext:         vc,
				ValidationContextSdsSecretConfig: root,
			}},
		}}
	default:
		return nil
	}
	return &corev3.TransportSocket{Name: tlsSocketName, ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: gen.MustAny(ctx)}}
}

// serviceIdentities are the identities a service's workloads may present
// (Istio's service accounts of a service): the ServiceEntry's
// subjectAltNames and the SPIFFE IDs of its endpoints' service accounts
// in the mesh trust domain. The snapshot's version covers both (a change
// of the accounts is a service change, core/model accounts.go).
func serviceIdentities(v *scope.View, svc *model.Service) []string {
	out := slices.Clone(svc.SubjectAltNames)
	td := "cluster.local"
	if m := v.Push.Mesh; m != nil && m.GetTrustDomain() != "" {
		td = m.GetTrustDomain()
	}
	for _, sa := range model.ServiceAccounts(v.Push.Endpoints.Endpoints(svc.Key())) {
		id := "spiffe://" + td + "/ns/" + svc.Namespace + "/sa/" + sa
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

func isWildcard(h string) bool { return len(h) > 0 && h[0] == '*' }

func file(path string) *corev3.DataSource {
	if path == "" {
		return nil
	}
	return &corev3.DataSource{Specifier: &corev3.DataSource_Filename{Filename: path}}
}

// sans matches subject alternative names exactly; spiffe:// URIs as URI
// SANs, others as DNS SANs.
func sans(names []string) []*tlsv3.SubjectAltNameMatcher {
	var out []*tlsv3.SubjectAltNameMatcher
	for _, n := range names {
		typ := tlsv3.SubjectAltNameMatcher_DNS
		if len(n) > 9 && n[:9] == "spiffe://" {
			typ = tlsv3.SubjectAltNameMatcher_URI
		}
		out = append(out, &tlsv3.SubjectAltNameMatcher{SanType: typ, Matcher: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: n}}})
	}
	return out
}

// grpcTLS is a proxyless gRPC client's upstream TLS: as Istio, only a
// DestinationRule's ISTIO_MUTUAL (no auto mTLS: a gRPC client may not
// use xDS credentials), with the bootstrap's certificate provider and
// the service's identities (or the rule's subjectAltNames) as SANs.
func grpcTLS(v *scope.View, svc *model.Service, t *networking.ClientTLSSettings) *corev3.TransportSocket {
	if t.GetMode() != networking.ClientTLSSettings_ISTIO_MUTUAL {
		return nil
	}
	names := t.GetSubjectAltNames()
	if len(names) == 0 {
		names = serviceIdentities(v, svc)
	}
	var ms []*matcherv3.StringMatcher
	for _, n := range names {
		ms = append(ms, &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: n}})
	}
	ctx := &tlsv3.UpstreamTlsContext{CommonTlsContext: gen.GRPCTLSContext(ms)}
	return &corev3.TransportSocket{Name: tlsSocketName, ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: gen.MustAny(ctx)}}
}
