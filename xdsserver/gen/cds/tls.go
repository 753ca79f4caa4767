package cds

import (
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/scope"
)

const tlsSocketName = "envoy.transport_sockets.tls"

// transportSocket builds the UpstreamTlsContext for a DestinationRule's
// TLS mode; nil for DISABLE or no TLS settings (no auto mTLS yet).
func transportSocket(v *scope.View, svc *model.Service, p model.Port, subset string, t *networking.ClientTLSSettings) *corev3.TransportSocket {
	var ctx *tlsv3.UpstreamTlsContext
	switch t.GetMode() {
	case networking.ClientTLSSettings_SIMPLE, networking.ClientTLSSettings_MUTUAL:
		ctx = &tlsv3.UpstreamTlsContext{Sni: t.GetSni(), CommonTlsContext: &tlsv3.CommonTlsContext{}}
		if ctx.Sni == "" && !isWildcard(svc.Hostname) {
			ctx.Sni = svc.Hostname
		}
		if !t.GetInsecureSkipVerify().GetValue() {
			vc := &tlsv3.CertificateValidationContext{MatchTypedSubjectAltNames: sans(t.GetSubjectAltNames())}
			if ca := t.GetCaCertificates(); ca != "" {
				vc.TrustedCa = file(ca)
			} else {
				vc.TrustedCa = &corev3.DataSource{Specifier: &corev3.DataSource_Filename{Filename: "/etc/ssl/certs/ca-certificates.crt"}}
			}
			ctx.CommonTlsContext.ValidationContextType = &tlsv3.CommonTlsContext_ValidationContext{ValidationContext: vc}
		}
		if t.GetMode() == networking.ClientTLSSettings_MUTUAL {
			if cred := t.GetCredentialName(); cred != "" {
				ctx.CommonTlsContext.TlsCertificateSdsSecretConfigs = []*tlsv3.SdsSecretConfig{{Name: cred, SdsConfig: gen.ADS()}}
			} else {
				ctx.CommonTlsContext.TlsCertificates = []*tlsv3.TlsCertificate{{
					CertificateChain: file(t.GetClientCertificate()), PrivateKey: file(t.GetPrivateKey()),
				}}
			}
		}
	case networking.ClientTLSSettings_ISTIO_MUTUAL:
		sds := gen.WorkloadSDS(v.Proxy)
		sni := t.GetSni()
		if sni == "" {
			sni = "outbound_." + gen.PortName(p.Number) + "_." + subset + "_." + svc.Hostname
		}
		ctx = &tlsv3.UpstreamTlsContext{Sni: sni, CommonTlsContext: &tlsv3.CommonTlsContext{
			AlpnProtocols:                  []string{"istio-peer-exchange", "istio"},
			TlsCertificateSdsSecretConfigs: []*tlsv3.SdsSecretConfig{{Name: gen.SDSDefault, SdsConfig: sds}},
			ValidationContextType: &tlsv3.CommonTlsContext_CombinedValidationContext{CombinedValidationContext: &tlsv3.CommonTlsContext_CombinedCertificateValidationContext{
				DefaultValidationContext:         &tlsv3.CertificateValidationContext{MatchTypedSubjectAltNames: sans(append(t.GetSubjectAltNames(), svc.SubjectAltNames...))},
				ValidationContextSdsSecretConfig: &tlsv3.SdsSecretConfig{Name: gen.SDSRootCA, SdsConfig: sds},
			}},
		}}
	default:
		return nil
	}
	return &corev3.TransportSocket{Name: tlsSocketName, ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: gen.MustAny(ctx)}}
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
