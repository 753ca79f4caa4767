package lds

import (
	"testing"

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
		var ctx *tlsv3.DownstreamTlsContext
		for _, l := range gatewayListenersOf(t, pc, md, nil) {
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
			t.Fatalf("agent %v: no TLS chain", agent)
		}
		cc := ctx.GetCommonTlsContext()
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
