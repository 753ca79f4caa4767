package cds

import (
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"

	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/gentest"
)

const originationConfig = `
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: ext, namespace: default}
spec:
  hosts: [api.example.com]
  location: MESH_EXTERNAL
  ports: [{number: 80, name: http, protocol: HTTP}, {number: 9000, name: tcp, protocol: TCP}]
  resolution: DNS
  subjectAltNames: [api.example.com]
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: ext, namespace: default}
spec:
  host: api.example.com
  trafficPolicy:
    tls: {mode: MUTUAL, caCertificates: /etc/ca.pem, clientCertificate: /etc/c.pem, privateKey: /etc/k.pem}
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: other, namespace: default}
spec:
  hosts: [other.example.com]
  location: MESH_EXTERNAL
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: DNS
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: other, namespace: default}
spec:
  host: other.example.com
  trafficPolicy: {tls: {mode: SIMPLE}}
`

// TestOriginationTLS: a DestinationRule's SIMPLE/MUTUAL TLS as istiod's
// constructUpstreamTLS: on HTTP ports no fixed SNI but auto_sni, and
// auto_san_validation when no subject alt names are given; TLS 1.2-1.3;
// the ServiceEntry's subjectAltNames when the rule has none; an Istio
// agent's proxy gets file secrets over the agent's SDS, another Envoy the
// files. On a TCP port the service's host is the SNI (istiod: none).
func TestOriginationTLS(t *testing.T) {
	pc := gentest.MustBuild(t, originationConfig)
	for _, agent := range []bool{true, false} {
		md := map[string]string{}
		if agent {
			md["ISTIO_VERSION"] = "1.28.0"
		}
		p := gentest.Node(t, "sidecar~10.0.0.1~a.default~default.svc.cluster.local", md)
		cs := gentest.ByName[*clusterv3.Cluster](gentest.Run(t, Generate, gen.Input{Push: pc, Proxy: p}))
		get := func(name string) (*clusterv3.Cluster, *tlsv3.UpstreamTlsContext) {
			t.Helper()
			c := cs[name]
			if c == nil {
				t.Fatalf("no cluster %s", name)
			}
			ctx := &tlsv3.UpstreamTlsContext{}
			if err := c.GetTransportSocket().GetTypedConfig().UnmarshalTo(ctx); err != nil {
				t.Fatalf("%s: transport socket: %v", name, err)
			}
			return c, ctx
		}
		autoSNIOf := func(c *clusterv3.Cluster) (sni, san bool) {
			opts := &httpv3.HttpProtocolOptions{}
			if a := c.GetTypedExtensionProtocolOptions()[httpProtocolOptionsKey]; a != nil {
				_ = a.UnmarshalTo(opts)
			}
			return opts.GetUpstreamHttpProtocolOptions().GetAutoSni(), opts.GetUpstreamHttpProtocolOptions().GetAutoSanValidation()
		}

		c, ctx := get("outbound|80||api.example.com")
		if sni, san := autoSNIOf(c); ctx.GetSni() != "" || !sni || !san {
			t.Errorf("agent %v: HTTP port: sni %q auto_sni %v auto_san %v, want none, true, true (the rule names no SANs: istiod judges the rule alone)", agent, ctx.GetSni(), sni, san)
		}
		if ctx.GetCommonTlsContext().GetTlsParams().GetTlsMinimumProtocolVersion() != tlsv3.TlsParameters_TLSv1_2 {
			t.Errorf("agent %v: tls_params %v", agent, ctx.GetCommonTlsContext().GetTlsParams())
		}
		var root, cert, san string
		if agent {
			cv := ctx.GetCommonTlsContext().GetCombinedValidationContext()
			root, cert = cv.GetValidationContextSdsSecretConfig().GetName(), ctx.GetCommonTlsContext().GetTlsCertificateSdsSecretConfigs()[0].GetName()
			san = cv.GetDefaultValidationContext().GetMatchTypedSubjectAltNames()[0].GetMatcher().GetExact()
			if root != "file-root:/etc/ca.pem" || cert != "file-cert:/etc/c.pem~/etc/k.pem" {
				t.Errorf("agent: secrets %q %q", root, cert)
			}
		} else {
			vc := ctx.GetCommonTlsContext().GetValidationContext()
			root, cert = vc.GetTrustedCa().GetFilename(), ctx.GetCommonTlsContext().GetTlsCertificates()[0].GetCertificateChain().GetFilename()
			san = vc.GetMatchTypedSubjectAltNames()[0].GetMatcher().GetExact()
			if root != "/etc/ca.pem" || cert != "/etc/c.pem" {
				t.Errorf("envoy: files %q %q", root, cert)
			}
		}
		if san != "api.example.com" {
			t.Errorf("agent %v: SAN %q, want the ServiceEntry's", agent, san)
		}
		if _, ctx := get("outbound|9000||api.example.com"); ctx.GetSni() != "api.example.com" {
			t.Errorf("agent %v: TCP port sni %q, want the host", agent, ctx.GetSni())
		}
		c, ctx = get("outbound|80||other.example.com")
		if sni, san := autoSNIOf(c); ctx.GetSni() != "" || !sni || !san {
			t.Errorf("agent %v: SIMPLE without SANs: sni %q auto_sni %v auto_san %v, want none, true, true", agent, ctx.GetSni(), sni, san)
		}
		if agent && ctx.GetCommonTlsContext().GetCombinedValidationContext().GetValidationContextSdsSecretConfig().GetName() != "file-root:system" {
			t.Errorf("agent: SIMPLE without CA: root %v, want file-root:system", ctx.GetCommonTlsContext().GetCombinedValidationContext())
		}
	}
}
