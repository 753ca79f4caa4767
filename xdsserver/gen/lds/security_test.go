package lds

import (
	"encoding/json"
	"strings"
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	meshv1alpha1 "istio.io/api/mesh/v1alpha1"

	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/core/push"
	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/authz"
	"github.com/baremesh/baremesh/xdsserver/gen/gentest"
)

// inboundWorld: web (10.0.0.1, app=web) serves HTTP 8080 and TCP 9000;
// a DENY policy on /admin* and on port 7000 selects it. The mesh mode
// comes from the case.
const inboundWorld = `
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: web, namespace: default}
spec:
  hosts: [web.default.svc.cluster.local]
  location: MESH_INTERNAL
  ports: [{number: 8080, name: http, protocol: HTTP}, {number: 9000, name: tcp, protocol: TCP}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.1, labels: {app: web}, serviceAccount: web}]
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: deny-admin, namespace: default}
spec:
  selector: {matchLabels: {app: web}}
  action: DENY
  rules:
  - to: [{operation: {paths: ["/admin*"]}}]
  - to: [{operation: {ports: ["7000"]}}]
`

func peerAuthn(mode, extra string) string {
	return "---\napiVersion: security.istio.io/v1\nkind: PeerAuthentication\nmetadata: {name: default, namespace: istio-system}\nspec:\n  mtls: {mode: " + mode + "}\n" + extra
}

// webInbound is virtualInbound of web's sidecar (app=web, 10.0.0.1).
func webInbound(t *testing.T, pc *push.PushContext) *listenerv3.Listener {
	t.Helper()
	p := gentest.ProxySpec{ID: "sidecar~10.0.0.1~web.default~default.svc.cluster.local", Labels: map[string]string{"app": "web"}}.Proxy(t)
	res := gentest.Run(t, Generate, gen.Input{Push: pc, Proxy: p, Names: []string{gen.VirtualInboundListener}})
	if len(res) != 1 {
		t.Fatalf("virtualInbound: %d resources, want 1", len(res))
	}
	return res[0].Resource.(*listenerv3.Listener)
}

// chainVerdict says what a matched chain does with a connection:
// "closed", or the chain's name, "+mtls" when it terminates mTLS with a
// client certificate required, "+rbac" when an RBAC filter (network or
// HTTP) runs before the proxying filter.
func chainVerdict(t *testing.T, fc *listenerv3.FilterChain) string {
	t.Helper()
	if fc == nil {
		return "closed"
	}
	v := fc.GetName()
	if ts := fc.GetTransportSocket(); ts != nil {
		var ctx tlsv3.DownstreamTlsContext
		if err := ts.GetTypedConfig().UnmarshalTo(&ctx); err != nil {
			t.Fatal(err)
		}
		if ctx.GetRequireClientCertificate().GetValue() {
			v += "+mtls"
		}
	}
	for _, f := range fc.GetFilters() {
		if f.GetName() == authz.NetworkFilterName {
			v += "+rbac"
		}
		if f.GetName() == hcmName {
			var h hcmv3.HttpConnectionManager
			if err := f.GetTypedConfig().UnmarshalTo(&h); err != nil {
				t.Fatal(err)
			}
			if len(h.GetHttpFilters()) > 0 && strings.HasPrefix(h.GetHttpFilters()[0].GetName(), authz.HTTPFilterName) {
				v += "+rbac"
			}
		}
	}
	return v
}

// TestInboundCatchAllFollowsPeerAuthentication (issue #24 hole 2): a
// connection to a port no service declares is held to the workload's
// PeerAuthentication and AuthorizationPolicies like a declared one. It
// failed before: every such connection, plaintext under STRICT too, took
// the default chain (tcp_proxy to the passthrough cluster, no TLS, no
// RBAC).
func TestInboundCatchAllFollowsPeerAuthentication(t *testing.T) {
	plainTCP := gentest.Conn{Port: 7000}
	plainHTTP := gentest.Conn{Port: 7000, HTTP: "http/1.1"}
	meshHTTP := gentest.Conn{Port: 7000, TLS: true, ALPN: []string{"istio-http/1.1"}}
	meshTCP := gentest.Conn{Port: 7000, TLS: true, ALPN: []string{"istio-peer-exchange", "istio"}}
	otherTLS := gentest.Conn{Port: 7000, TLS: true, ALPN: []string{"h2"}}
	for _, tc := range []struct {
		name, config string
		conn         gentest.Conn
		want         string
	}{
		{"strict plaintext tcp", peerAuthn("STRICT", ""), plainTCP, "closed"},
		{"strict plaintext http", peerAuthn("STRICT", ""), plainHTTP, "closed"},
		{"strict plain tls", peerAuthn("STRICT", ""), otherTLS, "virtualInbound+mtls+rbac"},
		{"strict mtls http", peerAuthn("STRICT", ""), meshHTTP, "virtualInbound-catchall-http+mtls+rbac"},
		{"strict mtls tcp", peerAuthn("STRICT", ""), meshTCP, "virtualInbound+mtls+rbac"},
		{"strict declared port plaintext", peerAuthn("STRICT", ""), gentest.Conn{Port: 9000}, "closed"},
		{"strict declared http port plaintext", peerAuthn("STRICT", ""), gentest.Conn{Port: 8080, HTTP: "http/1.1"}, "closed"},
		{"strict to the listener itself", peerAuthn("STRICT", ""), gentest.Conn{Port: 15006}, "virtualInbound-blackhole"},
		{"permissive plaintext tcp", peerAuthn("PERMISSIVE", ""), plainTCP, "virtualInbound+rbac"},
		{"permissive plaintext http", peerAuthn("PERMISSIVE", ""), plainHTTP, "virtualInbound-catchall-http+rbac"},
		{"permissive mtls http", peerAuthn("PERMISSIVE", ""), meshHTTP, "virtualInbound-catchall-http+mtls+rbac"},
		{"permissive mtls tcp", peerAuthn("PERMISSIVE", ""), meshTCP, "virtualInbound+mtls+rbac"},
		{"permissive plain tls", peerAuthn("PERMISSIVE", ""), otherTLS, "virtualInbound+rbac"},
		{"disable plaintext tcp", peerAuthn("DISABLE", ""), plainTCP, "virtualInbound+rbac"},
		{"disable plaintext http", peerAuthn("DISABLE", ""), plainHTTP, "virtualInbound-catchall-http+rbac"},
		// No chain needs TLS: the inspector does not run, TLS is bytes.
		{"disable tls", peerAuthn("DISABLE", ""), otherTLS, "virtualInbound+rbac"},
		// A port-level mode for an undeclared port gets its own chains.
		{"strict, port-level disable, that port", peerAuthn("STRICT", portLevel), gentest.Conn{Port: 7100}, "virtualInbound+rbac"},
		{"strict, port-level disable, another port", peerAuthn("STRICT", portLevel), plainTCP, "closed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := webInbound(t, gentest.MustBuild(t, inboundWorld, tc.config))
			if got := chainVerdict(t, gentest.MatchChain(l, tc.conn)); got != tc.want {
				t.Errorf("%+v: %s, want %s", tc.conn, got, tc.want)
			}
		})
	}
}

const portLevel = `---
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: web, namespace: default}
spec:
  selector: {matchLabels: {app: web}}
  portLevelMtls:
    7100: {mode: DISABLE}
`

// inboundHCMs are the connection managers of a listener's chains.
func listenerHCMs(t *testing.T, l *listenerv3.Listener) []*hcmv3.HttpConnectionManager {
	t.Helper()
	var out []*hcmv3.HttpConnectionManager
	for _, fc := range append(l.GetFilterChains(), l.GetDefaultFilterChain()) {
		for _, f := range fc.GetFilters() {
			if f.GetName() != hcmName {
				continue
			}
			var h hcmv3.HttpConnectionManager
			if err := f.GetTypedConfig().UnmarshalTo(&h); err != nil {
				t.Fatal(err)
			}
			out = append(out, &h)
		}
	}
	return out
}

// TestPathNormalizationBeforeRBAC (issue #24 hole 3): every connection
// manager that runs RBAC normalizes the path first, as the mesh's
// pathNormalization says, so a DENY on /admin* is not bypassed by
// /api/../admin, //admin or /%61dmin. Before, normalize_path was unset
// (Envoy's default: off) on every one. grpc-go does not normalize paths
// (gRPC paths are /service/method), so the settings are asserted here.
func TestPathNormalizationBeforeRBAC(t *testing.T) {
	type want struct {
		normalize, merge bool
		escaped          hcmv3.HttpConnectionManager_PathWithEscapedSlashesAction
	}
	for _, tc := range []struct {
		mode meshv1alpha1.MeshConfig_ProxyPathNormalization_NormalizationType
		want want
	}{
		{meshv1alpha1.MeshConfig_ProxyPathNormalization_DEFAULT, want{true, false, hcmv3.HttpConnectionManager_KEEP_UNCHANGED}},
		{meshv1alpha1.MeshConfig_ProxyPathNormalization_BASE, want{true, false, hcmv3.HttpConnectionManager_KEEP_UNCHANGED}},
		{meshv1alpha1.MeshConfig_ProxyPathNormalization_MERGE_SLASHES, want{true, true, hcmv3.HttpConnectionManager_KEEP_UNCHANGED}},
		{meshv1alpha1.MeshConfig_ProxyPathNormalization_DECODE_AND_MERGE_SLASHES, want{true, true, hcmv3.HttpConnectionManager_UNESCAPE_AND_FORWARD}},
		{meshv1alpha1.MeshConfig_ProxyPathNormalization_NONE, want{false, false, hcmv3.HttpConnectionManager_KEEP_UNCHANGED}},
	} {
		t.Run(tc.mode.String(), func(t *testing.T) {
			pc := gentest.MustBuild(t, inboundWorld, peerAuthn("PERMISSIVE", ""), gatewayWorld)
			pc.Mesh.PathNormalization = &meshv1alpha1.MeshConfig_ProxyPathNormalization{Normalization: tc.mode}
			hcms := listenerHCMs(t, webInbound(t, pc))
			for _, l := range gatewayListenersOf(t, pc, nil, nil) {
				hcms = append(hcms, listenerHCMs(t, l)...)
			}
			if len(hcms) < 4 {
				t.Fatalf("only %d connection managers", len(hcms))
			}
			for i, h := range hcms {
				got := want{h.GetNormalizePath().GetValue(), h.GetMergeSlashes(), h.GetPathWithEscapedSlashesAction()}
				if h.GetNormalizePath() == nil || got != tc.want {
					t.Errorf("connection manager %d (%s): normalize_path %v merge_slashes %v escaped slashes %v, want %+v",
						i, h.GetStatPrefix(), h.GetNormalizePath(), h.GetMergeSlashes(), h.GetPathWithEscapedSlashesAction(), tc.want)
				}
			}
		})
	}
}

const gatewayWorld = `---
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: ingress, namespace: istio-system}
spec:
  selector: {istio: ingressgateway}
  servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: ["*"]}]
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: gw-allow, namespace: istio-system}
spec:
  selector: {matchLabels: {istio: ingressgateway}}
  rules:
  - from: [{source: {remoteIpBlocks: ["192.0.2.0/24"]}}]
`

// gatewayListenersOf are the listeners of the ingress gateway
// (istio=ingressgateway) with the node metadata meta and PROXY_CONFIG
// proxyConfig.
func gatewayListenersOf(t *testing.T, pc *push.PushContext, meta map[string]string, proxyConfig map[string]any) []*listenerv3.Listener {
	t.Helper()
	p := gentest.ProxySpec{ID: "router~10.9.0.1~ingress-1.istio-system~istio-system.svc.cluster.local", Metadata: meta,
		Labels: map[string]string{"istio": "ingressgateway"}, ProxyConfig: proxyConfig}.Proxy(t)
	res := gentest.Run(t, Generate, gen.Input{Push: pc, Proxy: p})
	if len(res) == 0 {
		t.Fatal("gateway listeners: none")
	}
	var out []*listenerv3.Listener
	for _, r := range res {
		out = append(out, r.Resource.(*listenerv3.Listener))
	}
	return out
}

// TestGatewayTrustsOnlyConfiguredHops (issue #24 hole 4): a gateway's
// connection managers take the client address from the connection
// (use_remote_address), trust exactly gatewayTopology.numTrustedProxies
// X-Forwarded-For hops (mesh default, overridden by the proxy's
// PROXY_CONFIG) and sanitize x-forwarded-client-cert. Before,
// use_remote_address was unset, so remote.ip and remoteIpBlocks followed
// the client-written X-Forwarded-For.
func TestGatewayTrustsOnlyConfiguredHops(t *testing.T) {
	proxyConfig := func(js string) map[string]any {
		var m map[string]any
		if err := json.Unmarshal([]byte(js), &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	for _, tc := range []struct {
		name     string
		meshHops uint32
		pc       map[string]any // PROXY_CONFIG
		hops     uint32
		xfcc     hcmv3.HttpConnectionManager_ForwardClientCertDetails
	}{
		{"defaults", 0, nil, 0, hcmv3.HttpConnectionManager_SANITIZE_SET},
		{"mesh default topology", 2, nil, 2, hcmv3.HttpConnectionManager_SANITIZE_SET},
		{"proxy config wins", 2, proxyConfig(`{"gatewayTopology": {"numTrustedProxies": 1, "forwardClientCertDetails": "FORWARD_ONLY"}}`), 1, hcmv3.HttpConnectionManager_FORWARD_ONLY},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pc := gentest.MustBuild(t, gatewayWorld)
			if tc.meshHops > 0 {
				pc.Mesh.DefaultConfig.GatewayTopology = &meshv1alpha1.Topology{NumTrustedProxies: tc.meshHops}
			}
			hcms := listenerHCMs(t, gatewayListenersOf(t, pc, nil, tc.pc)[0])
			if len(hcms) == 0 {
				t.Fatal("no connection manager on the gateway")
			}
			for _, h := range hcms {
				if !h.GetUseRemoteAddress().GetValue() || h.GetXffNumTrustedHops() != tc.hops || h.GetForwardClientCertDetails() != tc.xfcc {
					t.Errorf("use_remote_address %v, xff_num_trusted_hops %d, forward_client_cert_details %v; want true, %d, %v",
						h.GetUseRemoteAddress(), h.GetXffNumTrustedHops(), h.GetForwardClientCertDetails(), tc.hops, tc.xfcc)
				}
			}
		})
	}
	// Sidecars never take the client's address from the connection (the
	// app's own local connection) nor trust forwarded hops.
	pc := gentest.MustBuild(t, inboundWorld, peerAuthn("PERMISSIVE", ""))
	for _, h := range listenerHCMs(t, webInbound(t, pc)) {
		if h.GetUseRemoteAddress() == nil || h.GetUseRemoteAddress().GetValue() || h.GetXffNumTrustedHops() != 0 ||
			h.GetForwardClientCertDetails() != hcmv3.HttpConnectionManager_APPEND_FORWARD {
			t.Errorf("sidecar inbound %s: use_remote_address %v, hops %d, xfcc %v", h.GetStatPrefix(), h.GetUseRemoteAddress(), h.GetXffNumTrustedHops(), h.GetForwardClientCertDetails())
		}
	}
}

// TestHTTPConnectionManagerSettings (issue #25 item 3): every Envoy
// connection manager allows WebSocket upgrades (Envoy answers 403
// otherwise) and never resets idle streams (stream_idle_timeout 0).
func TestHTTPConnectionManagerSettings(t *testing.T) {
	pc := gentest.MustBuild(t, inboundWorld, peerAuthn("PERMISSIVE", ""), gatewayWorld)
	p := gentest.Node(t, "sidecar~10.0.0.1~web.default~default.svc.cluster.local", nil)
	var hcms []*hcmv3.HttpConnectionManager
	for _, r := range gentest.Run(t, Generate, gen.Input{Push: pc, Proxy: p}) {
		hcms = append(hcms, listenerHCMs(t, r.Resource.(*listenerv3.Listener))...)
	}
	for _, l := range gatewayListenersOf(t, pc, nil, nil) {
		hcms = append(hcms, listenerHCMs(t, l)...)
	}
	if len(hcms) < 4 {
		t.Fatalf("only %d connection managers", len(hcms))
	}
	for _, h := range hcms {
		ups := h.GetUpgradeConfigs()
		if len(ups) != 1 || !strings.EqualFold(ups[0].GetUpgradeType(), "websocket") {
			t.Errorf("%s: upgrade configs %v, want websocket", h.GetStatPrefix(), ups)
		}
		if d := h.GetStreamIdleTimeout(); d == nil || d.AsDuration() != 0 {
			t.Errorf("%s: stream_idle_timeout %v, want 0s", h.GetStatPrefix(), d)
		}
	}
}

// TestUnauthenticatedGatewayGetsNoTLSServers: SDS serves credentials only
// to an authenticated identity of their namespace, so a gateway on the
// plaintext port gets no listener chain that would wait for one (a chain
// waiting for a secret keeps its whole listener from serving); the same
// gateway authenticated gets them.
func TestUnauthenticatedGatewayGetsNoTLSServers(t *testing.T) {
	dir := "../testdata/gateway"
	pc := gentest.Scenario(t, dir)
	spec := gentest.Proxies(t, dir)[0]
	tlsChains := func(p *model.Proxy) int {
		return len(gentest.SecretNames(gentest.Run(t, Generate, gen.Input{Push: pc, Proxy: p})))
	}
	authed := spec.Proxy(t)
	if authed.Identity == nil {
		t.Fatal("the scenario's gateway has no identity")
	}
	if n := tlsChains(authed); n == 0 {
		t.Fatal("authenticated gateway: no chain names an SDS credential")
	}
	plain := spec.Proxy(t)
	plain.Identity = nil
	if n := tlsChains(plain); n != 0 {
		t.Errorf("unauthenticated gateway: chains name %d SDS credentials it will never get", n)
	}
}

// TestIstioMutualGatewayServer: an ISTIO_MUTUAL Gateway server presents
// the gateway's workload certificate and requires a client certificate
// from the mesh root (SDS default and ROOTCA), as istiod. Before, it got
// a TLS context with neither a certificate nor a client certificate
// requirement (the harness against istiod showed it on Istio's gateway
// benchmark).
func TestIstioMutualGatewayServer(t *testing.T) {
	pc := gentest.MustBuild(t, `
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: mesh-gw, namespace: istio-system}
spec:
  selector: {istio: ingressgateway}
  servers:
  - port: {number: 443, name: https, protocol: HTTPS}
    hosts: ["*"]
    tls: {mode: ISTIO_MUTUAL, subjectAltNames: ["spiffe://cluster.local/ns/shop/sa/web"]}
`)
	ls := gatewayListenersOf(t, pc, nil, nil)
	var ctx tlsv3.DownstreamTlsContext
	found := false
	for _, l := range ls {
		for _, fc := range l.GetFilterChains() {
			if ts := fc.GetTransportSocket(); ts != nil {
				if err := ts.GetTypedConfig().UnmarshalTo(&ctx); err != nil {
					t.Fatal(err)
				}
				found = true
			}
		}
	}
	if !found {
		t.Fatal("no TLS chain for the ISTIO_MUTUAL server")
	}
	c := ctx.GetCommonTlsContext()
	if !ctx.GetRequireClientCertificate().GetValue() || len(c.GetTlsCertificateSdsSecretConfigs()) != 1 ||
		c.GetTlsCertificateSdsSecretConfigs()[0].GetName() != gen.SDSDefault ||
		c.GetCombinedValidationContext().GetValidationContextSdsSecretConfig().GetName() != gen.SDSRootCA ||
		len(c.GetCombinedValidationContext().GetDefaultValidationContext().GetMatchTypedSubjectAltNames()) != 1 {
		t.Errorf("ISTIO_MUTUAL server context: %v", &ctx)
	}
}
