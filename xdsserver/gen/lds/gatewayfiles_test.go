package lds

import (
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"

	"github.com/baremesh/baremesh/xdsserver/gen/gentest"
)

// TestGatewayFileCertificates: a gateway server's certificate files go
// to an Istio agent's proxy as the agent's SDS secrets "file-cert:" and
// "file-root:", as istiod sends them (the agent reads and rotates them),
// and to another Envoy as file names it reads itself.
func TestGatewayFileCertificates(t *testing.T) {
	pc := gentest.MustBuild(t, `
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: ingress, namespace: istio-system}
spec:
  selector: {istio: ingressgateway}
  servers:
  - port: {number: 443, name: https-api, protocol: HTTPS}
    hosts: [api.example.com]
    tls: {mode: MUTUAL, serverCertificate: /etc/certs/api.pem, privateKey: /etc/certs/api.key, caCertificates: /etc/certs/ca.pem}
`)
	for _, agent := range []bool{true, false} {
		md := map[string]string{}
		if agent {
			md["ISTIO_VERSION"] = "1.28.0"
		}
		cc := gatewayTLS(t, gatewayListenersOf(t, pc, md, nil)).GetCommonTlsContext()
		if agent {
			certs := cc.GetTlsCertificateSdsSecretConfigs()
			root := cc.GetCombinedValidationContext().GetValidationContextSdsSecretConfig()
			if len(certs) != 1 || certs[0].GetName() != "file-cert:/etc/certs/api.pem~/etc/certs/api.key" || root.GetName() != "file-root:/etc/certs/ca.pem" {
				t.Errorf("agent: secrets %v, root %v", certs, root)
			}
			if certs[0].GetSdsConfig().GetApiConfigSource() == nil {
				t.Errorf("agent: file secrets not from the agent's SDS: %v", certs[0].GetSdsConfig())
			}
		} else if cc.GetTlsCertificates()[0].GetCertificateChain().GetFilename() != "/etc/certs/api.pem" || cc.GetValidationContext().GetTrustedCa().GetFilename() != "/etc/certs/ca.pem" {
			t.Errorf("envoy: %v", cc)
		}
	}
}

// TestGatewayClientCertificateChecks: a MUTUAL or OPTIONAL_MUTUAL server
// checks a client certificate against its subjectAltNames, certificate
// pins, CRL and insecureSkipVerify, as istiod's: with a credentialName
// (the CA from "NAME-cacert" in a combined context), with certificate
// files for an Istio agent and for a plain Envoy. Before, only
// ISTIO_MUTUAL read subjectAltNames: a MUTUAL gateway took any
// certificate its CA signed.
func TestGatewayClientCertificateChecks(t *testing.T) {
	pc := gentest.MustBuild(t, `
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: ingress, namespace: istio-system}
spec:
  selector: {istio: ingressgateway}
  servers:
  - port: {number: 443, name: https-files, protocol: HTTPS}
    hosts: [files.example.com]
    tls:
      mode: MUTUAL
      serverCertificate: /etc/certs/api.pem
      privateKey: /etc/certs/api.key
      caCertificates: /etc/certs/ca.pem
      caCrl: /etc/certs/ca.crl
      subjectAltNames: [client.example.com, spiffe://partner.example/ns/a/sa/b]
      verifyCertificateHash: ["DF6FF72FE9116521268F6F2DD4966F51DF479883FE7037B39F75916AC3049D1A"]
`)
	for _, agent := range []bool{true, false} {
		md := map[string]string{}
		if agent {
			md["ISTIO_VERSION"] = "1.28.0"
		}
		cc := gatewayTLS(t, gatewayListenersOf(t, pc, md, nil)).GetCommonTlsContext()
		vc := cc.GetValidationContext()
		if agent {
			vc = cc.GetCombinedValidationContext().GetDefaultValidationContext()
		}
		checkClientValidation(t, vc, "/etc/certs/ca.crl", false)
	}
}

func checkClientValidation(t *testing.T, vc *tlsv3.CertificateValidationContext, crl string, insecure bool) {
	t.Helper()
	sans := vc.GetMatchTypedSubjectAltNames()
	if len(sans) != 2 || sans[0].GetSanType() != tlsv3.SubjectAltNameMatcher_DNS || sans[0].GetMatcher().GetExact() != "client.example.com" ||
		sans[1].GetSanType() != tlsv3.SubjectAltNameMatcher_URI || sans[1].GetMatcher().GetExact() != "spiffe://partner.example/ns/a/sa/b" {
		t.Errorf("subjectAltNames %v", sans)
	}
	if len(vc.GetVerifyCertificateHash()) != 1 {
		t.Errorf("certificate hash pins %v", vc.GetVerifyCertificateHash())
	}
	if vc.GetCrl().GetFilename() != crl {
		t.Errorf("CRL %v, want %q", vc.GetCrl(), crl)
	}
	if got := vc.GetTrustChainVerification() == tlsv3.CertificateValidationContext_ACCEPT_UNTRUSTED; got != insecure {
		t.Errorf("chain accepted untrusted: %v, want %v", got, insecure)
	}
}

// gatewayTLS is the one TLS context among listeners' chains.
func gatewayTLS(t *testing.T, listeners []*listenerv3.Listener) *tlsv3.DownstreamTlsContext {
	t.Helper()
	var ctx *tlsv3.DownstreamTlsContext
	for _, l := range listeners {
		for _, fc := range l.GetFilterChains() {
			if ts := fc.GetTransportSocket(); ts != nil {
				ctx = &tlsv3.DownstreamTlsContext{}
				if err := ts.GetTypedConfig().UnmarshalTo(ctx); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if ctx == nil {
		t.Fatal("no TLS chain")
	}
	return ctx
}
