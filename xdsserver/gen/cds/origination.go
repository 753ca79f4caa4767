package cds

import (
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/types/known/anypb"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/scope"
)

// originationTLS is the UpstreamTlsContext of a DestinationRule's SIMPLE
// or MUTUAL TLS, as istiod's constructUpstreamTLS: TLS 1.2 to 1.3; the
// rule's SNI, else none on HTTP ports (auto_sni names each request's
// host, autoSNI) and, on other ports, the service's host (istiod sends
// none there: a deliberate difference, servers that need SNI answer
// TLS to a known name); the rule's subject alt names, else a
// ServiceEntry's; the credential's certificates over SDS, or files: an
// Istio agent's proxy reads them through the agent's SDS ("file-cert:",
// "file-root:", "file-root:system" without a CA, as the agent serves
// them with rotation), another Envoy from the files itself.
func originationTLS(v *scope.View, svc *model.Service, p model.Port, t *networking.ClientTLSSettings, h2 bool) *tlsv3.UpstreamTlsContext {
	ctx := &tlsv3.UpstreamTlsContext{Sni: t.GetSni(), CommonTlsContext: &tlsv3.CommonTlsContext{TlsParams: istioTLSParams}}
	if ctx.Sni == "" && !p.Protocol.IsHTTP() && !isWildcard(svc.Hostname) {
		ctx.Sni = svc.Hostname
	}
	names := t.GetSubjectAltNames()
	if len(names) == 0 && svc.Source.Kind == config.ServiceEntry {
		names = svc.SubjectAltNames
	}
	agent := v.Proxy.IstioVersion != ""
	mutual := t.GetMode() == networking.ClientTLSSettings_MUTUAL
	cc := ctx.CommonTlsContext
	switch cred := t.GetCredentialName(); {
	case cred != "":
		if !t.GetInsecureSkipVerify().GetValue() {
			cc.ValidationContextType = combined(names, &tlsv3.SdsSecretConfig{Name: cred + "-cacert", SdsConfig: gen.CredentialSDS()})
		}
		if mutual {
			cc.TlsCertificateSdsSecretConfigs = []*tlsv3.SdsSecretConfig{{Name: cred, SdsConfig: gen.CredentialSDS()}}
		}
	case agent:
		// The agent's file secrets: no initial fetch timeout, as istiod.
		src := gen.WorkloadSDS(v.Proxy)
		src.InitialFetchTimeout = nil
		if t.GetInsecureSkipVerify().GetValue() {
			cc.ValidationContextType = &tlsv3.CommonTlsContext_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{}}
		} else {
			root := "file-root:system"
			if ca := t.GetCaCertificates(); ca != "" {
				root = "file-root:" + ca
			}
			cc.ValidationContextType = combined(names, &tlsv3.SdsSecretConfig{Name: root, SdsConfig: src})
		}
		if mutual {
			cc.TlsCertificateSdsSecretConfigs = []*tlsv3.SdsSecretConfig{{
				Name: "file-cert:" + t.GetClientCertificate() + "~" + t.GetPrivateKey(), SdsConfig: src,
			}}
		}
	default:
		if !t.GetInsecureSkipVerify().GetValue() {
			vc := &tlsv3.CertificateValidationContext{MatchTypedSubjectAltNames: sans(names), TrustedCa: file(t.GetCaCertificates())}
			if vc.TrustedCa == nil {
				vc.TrustedCa = file("/etc/ssl/certs/ca-certificates.crt")
			}
			cc.ValidationContextType = &tlsv3.CommonTlsContext_ValidationContext{ValidationContext: vc}
		}
		if mutual {
			cc.TlsCertificates = []*tlsv3.TlsCertificate{{CertificateChain: file(t.GetClientCertificate()), PrivateKey: file(t.GetPrivateKey())}}
		}
	}
	if h2 {
		cc.AlpnProtocols = alpnH2
	}
	return ctx
}

func combined(names []string, root *tlsv3.SdsSecretConfig) *tlsv3.CommonTlsContext_CombinedValidationContext {
	return &tlsv3.CommonTlsContext_CombinedValidationContext{CombinedValidationContext: &tlsv3.CommonTlsContext_CombinedCertificateValidationContext{
		DefaultValidationContext:         &tlsv3.CertificateValidationContext{MatchTypedSubjectAltNames: sans(names)},
		ValidationContextSdsSecretConfig: root,
	}}
}

// autoSNI sets, as istiod's setAutoSniAndAutoSanValidation, Envoy's
// auto_sni when the rule names no SNI (each HTTP request's host is the
// SNI) and auto_san_validation when it names no SNI and no subject alt
// names and verifies (the server's certificate must match that host),
// in the cluster's HTTP protocol options (copied: options maps may be
// shared).
func autoSNI(c *clusterv3.Cluster, t *networking.ClientTLSSettings) {
	if t.GetSni() != "" {
		return
	}
	opts := &httpv3.HttpProtocolOptions{}
	if a := c.GetTypedExtensionProtocolOptions()[httpProtocolOptionsKey]; a != nil {
		if err := a.UnmarshalTo(opts); err != nil {
			return // ours, always an HttpProtocolOptions
		}
	}
	if opts.UpstreamProtocolOptions == nil { // as istiod: HTTP/1 unless the port says otherwise
		opts.UpstreamProtocolOptions = &httpv3.HttpProtocolOptions_ExplicitHttpConfig_{ExplicitHttpConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig{
			ProtocolConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_HttpProtocolOptions{HttpProtocolOptions: &corev3.Http1ProtocolOptions{}},
		}}
	}
	if opts.UpstreamHttpProtocolOptions == nil {
		opts.UpstreamHttpProtocolOptions = &corev3.UpstreamHttpProtocolOptions{}
	}
	opts.UpstreamHttpProtocolOptions.AutoSni = true
	opts.UpstreamHttpProtocolOptions.AutoSanValidation = len(t.GetSubjectAltNames()) == 0 && !t.GetInsecureSkipVerify().GetValue()
	out := make(map[string]*anypb.Any, len(c.GetTypedExtensionProtocolOptions())+1)
	for k, a := range c.GetTypedExtensionProtocolOptions() {
		out[k] = a
	}
	out[httpProtocolOptionsKey] = gen.MustAny(opts)
	c.TypedExtensionProtocolOptions = out
}
