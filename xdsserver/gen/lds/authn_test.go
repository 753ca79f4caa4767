package lds

import (
	"slices"
	"strings"
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	jwtv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/jwt_authn/v3"
	rbachttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	extauthznetv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/ext_authz/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/proto"
	meshv1alpha1 "istio.io/api/mesh/v1alpha1"

	"github.com/baremesh/baremesh/core/jwks"
	"github.com/baremesh/baremesh/core/push"
	"github.com/baremesh/baremesh/xdsserver/gen/authz"
	"github.com/baremesh/baremesh/xdsserver/gen/gentest"
)

// authnWorld adds to inboundWorld: an ext-authz service, a
// RequestAuthentication with every JWT rule field (inline keys) and one
// by jwksUri, an ALLOW on request principals and CUSTOM policies on
// /ext* (HTTP provider) and on port 9000 (gRPC provider).
const authnWorld = `---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: ext-authz, namespace: foo}
spec:
  hosts: [ext-authz.foo.svc.cluster.local]
  location: MESH_INTERNAL
  ports: [{number: 8000, name: http, protocol: HTTP}, {number: 9000, name: grpc, protocol: GRPC}]
  resolution: STATIC
  endpoints: [{address: 10.0.9.1}]
---
apiVersion: security.istio.io/v1
kind: RequestAuthentication
metadata: {name: jwt, namespace: default}
spec:
  selector: {matchLabels: {app: web}}
  jwtRules:
  - issuer: https://b.example
    jwksUri: https://b.example/keys
  - issuer: https://a.example
    audiences: [web]
    jwks: '{"keys":[{"kty":"RSA","kid":"a","e":"AQAB","n":"AAAA"}]}'
    fromHeaders: [{name: x-jwt, prefix: "Bearer "}]
    fromParams: [token]
    fromCookies: [session]
    outputPayloadToHeader: x-payload
    outputClaimToHeaders: [{header: x-sub, claim: sub}]
    forwardOriginalToken: true
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: jwt-only, namespace: default}
spec:
  selector: {matchLabels: {app: web}}
  action: ALLOW
  rules:
  - from: [{source: {requestPrincipals: ["https://a.example/*"]}}]
    when: [{key: "request.auth.claims[groups]", values: [admin]}]
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: ext-http, namespace: default}
spec:
  selector: {matchLabels: {app: web}}
  action: CUSTOM
  provider: {name: http-authz}
  rules: [{to: [{operation: {paths: ["/ext*"]}}]}]
`

const customGRPC = `---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: ext-tcp, namespace: default}
spec:
  selector: {matchLabels: {app: web}}
  action: CUSTOM
  provider: {name: grpc-authz}
  rules: [{to: [{operation: {ports: ["9000"]}}]}]
`

func authnPush(t *testing.T, extra ...string) *push.PushContext {
	t.Helper()
	return authnPushOf(t, authnWorld, extra...)
}

func authnPushOf(t *testing.T, world string, extra ...string) *push.PushContext {
	t.Helper()
	pc := gentest.MustBuild(t, append([]string{inboundWorld, peerAuthn("PERMISSIVE", ""), world, gatewayWorld}, extra...)...)
	pc.Mesh.ExtensionProviders = []*meshv1alpha1.MeshConfig_ExtensionProvider{
		{Name: "http-authz", Provider: &meshv1alpha1.MeshConfig_ExtensionProvider_EnvoyExtAuthzHttp{EnvoyExtAuthzHttp: &meshv1alpha1.MeshConfig_ExtensionProvider_EnvoyExternalAuthorizationHttpProvider{
			Service: "ext-authz.foo.svc.cluster.local", Port: 8000, IncludeRequestHeadersInCheck: []string{"x-ext-*"}, HeadersToUpstreamOnAllow: []string{"x-user"},
		}}},
		{Name: "grpc-authz", Provider: &meshv1alpha1.MeshConfig_ExtensionProvider_EnvoyExtAuthzGrpc{EnvoyExtAuthzGrpc: &meshv1alpha1.MeshConfig_ExtensionProvider_EnvoyExternalAuthorizationGrpcProvider{
			Service: "foo/ext-authz.foo.svc.cluster.local", Port: 9000, FailOpen: true,
		}}},
	}
	return pc
}

func httpFiltersOf(t *testing.T, fc *listenerv3.FilterChain) []*hcmv3.HttpFilter {
	t.Helper()
	for _, f := range fc.GetFilters() {
		if f.GetName() == hcmName {
			var h hcmv3.HttpConnectionManager
			if err := f.GetTypedConfig().UnmarshalTo(&h); err != nil {
				t.Fatal(err)
			}
			return h.GetHttpFilters()
		}
	}
	t.Fatalf("chain %s has no connection manager", fc.GetName())
	return nil
}

func names[T interface{ GetName() string }](fs []T) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.GetName()
	}
	return out
}

// TestJWTAndCustomOnInboundHTTP: an HTTP request to the workload meets,
// in istiod's order, CUSTOM's shadow RBAC and ext_authz (enabled only
// for the provider's rules, calling the provider service's outbound
// cluster), jwt_authn with the RequestAuthentication's rules (sorted by
// issuer, every field carried, fetched keys inlined, PublicOnly where
// none were fetched), then the RBAC filters, whose request-principal
// rule matches the verified token's claims. A TCP connection meets no
// HTTP provider.
func TestJWTAndCustomOnInboundHTTP(t *testing.T) {
	pc := authnPush(t)
	l := webInbound(t, pc)
	for _, conn := range []gentest.Conn{{Port: 8080, HTTP: "http/1.1"}, {Port: 7000, HTTP: "http/1.1"}} {
		fc := gentest.MatchChain(l, conn)
		if fc == nil {
			t.Fatalf("port %d: connection closed", conn.Port)
		}
		fs := httpFiltersOf(t, fc)
		got := names(fs)
		want := []string{authz.HTTPFilterName, authz.ExtAuthzHTTPFilterName, authz.JWTFilterName, authz.HTTPFilterName, authz.HTTPFilterName}
		if len(got) < len(want) || !slices.Equal(got[:len(want)], want) {
			t.Fatalf("port %d: HTTP filters %v, want them to start %v", conn.Port, got, want)
		}
		var shadow rbachttpv3.RBAC
		mustUnmarshal(t, fs[0], &shadow)
		if shadow.GetRules() != nil || shadow.GetShadowRulesStatPrefix() != "istio_ext_authz_" ||
			shadow.GetShadowRules().GetPolicies()["istio-ext-authz-http-authz-ns[default]-policy[ext-http]-rule[0]"] == nil {
			t.Errorf("CUSTOM RBAC = %v, want only shadow rules naming the policy", &shadow)
		}
		var ext extauthzv3.ExtAuthz
		mustUnmarshal(t, fs[1], &ext)
		if c := ext.GetHttpService().GetServerUri().GetCluster(); c != "outbound|8000||ext-authz.foo.svc.cluster.local" {
			t.Errorf("ext_authz cluster = %q", c)
		}
		if m := ext.GetFilterEnabledMetadata(); m.GetFilter() != authz.HTTPFilterName || m.GetPath()[0].GetKey() != "istio_ext_authz_shadow_effective_policy_id" ||
			m.GetValue().GetStringMatch().GetPrefix() != "istio-ext-authz-http-authz" {
			t.Errorf("ext_authz filter_enabled_metadata = %v", m)
		}
		if p := ext.GetAllowedHeaders().GetPatterns(); len(p) != 1 || p[0].GetPrefix() != "x-ext-" {
			t.Errorf("allowed headers = %v", p)
		}
		var jwt jwtv3.JwtAuthentication
		mustUnmarshal(t, fs[2], &jwt)
		a, b := jwt.GetProviders()["origins-0"], jwt.GetProviders()["origins-1"]
		if a.GetIssuer() != "https://a.example" || b.GetIssuer() != "https://b.example" {
			t.Fatalf("providers not sorted by issuer: %v", jwt.GetProviders())
		}
		if !a.GetForward() || a.GetForwardPayloadHeader() != "x-payload" || a.GetPayloadInMetadata() != "payload" ||
			a.GetFromHeaders()[0].GetValuePrefix() != "Bearer " || a.GetFromParams()[0] != "token" || a.GetFromCookies()[0] != "session" ||
			a.GetClaimToHeaders()[0].GetHeaderName() != "x-sub" || a.GetAudiences()[0] != "web" || a.GetClearRouteCache() ||
			!strings.Contains(a.GetLocalJwks().GetInlineString(), `"kid":"a"`) {
			t.Errorf("provider a = %v", a)
		}
		if b.GetLocalJwks().GetInlineString() != jwks.PublicOnly {
			t.Errorf("never-fetched jwksUri: keys %q, want PublicOnly", b.GetLocalJwks().GetInlineString())
		}
		if len(jwt.GetRules()) != 1 || len(jwt.GetRules()[0].GetRequires().GetRequiresAny().GetRequirements()) != 3 || !jwt.GetBypassCorsPreflight() {
			t.Errorf("requirements = %v, want any of origins-0, origins-1, all of (each or missing)", jwt.GetRules())
		}
		var allow rbachttpv3.RBAC
		mustUnmarshal(t, fs[4], &allow)
		pol := allow.GetRules().GetPolicies()["ns[default]-policy[jwt-only]-rule[0]"]
		if allow.GetRules().GetAction() != rbacv3.RBAC_ALLOW || pol == nil || !strings.Contains(pol.String(), "envoy.filters.http.jwt_authn") ||
			!strings.Contains(pol.String(), `key:"groups"`) {
			t.Errorf("ALLOW on request principals = %v", pol)
		}
	}
	// TCP: no HTTP provider, no JWT; the network RBAC only.
	fc := gentest.MatchChain(l, gentest.Conn{Port: 9000})
	if got := names(fc.GetFilters()); slices.Contains(got, authz.ExtAuthzNetworkFilterName) {
		t.Errorf("TCP chain has ext_authz for an HTTP provider: %v", got)
	}

	// Fetched keys replace PublicOnly.
	cp := *pc
	cp.JWKS = jwks.NewSet(map[jwks.Source]jwks.Entry{{URI: "https://b.example/keys"}: {Keys: `{"keys":[{"kid":"b"}]}`}})
	fs := httpFiltersOf(t, gentest.MatchChain(webInbound(t, &cp), gentest.Conn{Port: 8080, HTTP: "http/1.1"}))
	var jwt jwtv3.JwtAuthentication
	mustUnmarshal(t, fs[2], &jwt)
	if got := jwt.GetProviders()["origins-1"].GetLocalJwks().GetInlineString(); got != `{"keys":[{"kid":"b"}]}` {
		t.Errorf("fetched keys not inlined: %q", got)
	}
}

// TestCustomGRPCOnTCP: a gRPC provider checks TCP connections too: its
// shadow network RBAC and network ext_authz (failure_mode_allow as the
// provider says) come before the network RBAC filters. (Both CUSTOM
// policies name it: two providers on one workload would deny.)
func TestCustomGRPCOnTCP(t *testing.T) {
	pc := authnPushOf(t, strings.Replace(authnWorld, "{name: http-authz}", "{name: grpc-authz}", 1), customGRPC)
	fc := gentest.MatchChain(webInbound(t, pc), gentest.Conn{Port: 9000})
	got := names(fc.GetFilters())
	want := []string{authz.NetworkFilterName, authz.ExtAuthzNetworkFilterName, authz.NetworkFilterName}
	if len(got) < 3 || !slices.Equal(got[:3], want) {
		t.Fatalf("TCP filters %v, want them to start %v", got, want)
	}
	var ext extauthznetv3.ExtAuthz
	if err := fc.GetFilters()[1].GetTypedConfig().UnmarshalTo(&ext); err != nil {
		t.Fatal(err)
	}
	if g := ext.GetGrpcService().GetEnvoyGrpc(); g.GetClusterName() != "outbound|9000||ext-authz.foo.svc.cluster.local" || g.GetAuthority() != "ext-authz.foo.svc.cluster.local" ||
		!ext.GetFailureModeAllow() || ext.GetFilterEnabledMetadata().GetValue().GetStringMatch().GetPrefix() != "istio-ext-authz-grpc-authz" {
		t.Errorf("network ext_authz = %v", &ext)
	}
}

// TestCustomUnusableProviderDenies: a CUSTOM policy whose provider is
// unknown, or whose service is not in the registry, or one of two
// providers on one workload, denies what it selects (istiod's rule),
// with the problem named.
func TestCustomUnusableProviderDenies(t *testing.T) {
	for name, tc := range map[string]struct {
		mutate  func(pc *push.PushContext)
		extra   string
		problem string
	}{
		"unknown":         {mutate: func(pc *push.PushContext) { pc.Mesh.ExtensionProviders = nil }, problem: `no extension provider "http-authz"`},
		"service missing": {mutate: func(pc *push.PushContext) { pc.Mesh.ExtensionProviders[0].GetEnvoyExtAuthzHttp().Service = "nope.svc" }, problem: "nope.svc not found"},
		"two providers":   {extra: customGRPC},
	} {
		t.Run(name, func(t *testing.T) {
			pc := authnPush(t, tc.extra)
			if tc.mutate != nil {
				tc.mutate(pc)
			}
			fs := httpFiltersOf(t, gentest.MatchChain(webInbound(t, pc), gentest.Conn{Port: 8080, HTTP: "http/1.1"}))
			if slices.Contains(names(fs), authz.ExtAuthzHTTPFilterName) {
				t.Fatalf("ext_authz present: %v", names(fs))
			}
			found := false
			for _, f := range fs[:2] {
				if f.GetName() != authz.HTTPFilterName {
					continue
				}
				var deny rbachttpv3.RBAC
				mustUnmarshal(t, f, &deny)
				found = found || (deny.GetRules().GetAction() == rbacv3.RBAC_DENY &&
					deny.GetRules().GetPolicies()["istio-ext-authz-http-authz-ns[default]-policy[ext-http]-rule[0]-deny-due-to-bad-CUSTOM-action"] != nil)
			}
			if !found {
				t.Errorf("first filters %v: none DENYs the CUSTOM rule", names(fs))
			}
			if tc.problem == "" {
				return
			}
			for _, p := range authz.CustomProblems(pc) {
				if p.Policy == "default/ext-http" && strings.Contains(p.Error, tc.problem) {
					return
				}
			}
			t.Errorf("CustomProblems %+v name no %q", authz.CustomProblems(pc), tc.problem)
		})
	}
}

// TestJWTOnGateway: a gateway's connection managers run jwt_authn (with
// clear_route_cache, as istiod sets it for gateways) before RBAC.
func TestJWTOnGateway(t *testing.T) {
	pc := authnPush(t, `---
apiVersion: security.istio.io/v1
kind: RequestAuthentication
metadata: {name: gw-jwt, namespace: istio-system}
spec:
  selector: {matchLabels: {istio: ingressgateway}}
  jwtRules: [{issuer: https://gw.example, jwks: '{"keys":[]}'}]
`)
	for _, l := range gatewayListenersOf(t, pc, nil, nil) {
		for _, fc := range l.GetFilterChains() {
			fs := httpFiltersOf(t, fc)
			got := names(fs)
			if len(got) < 2 || got[0] != authz.JWTFilterName || got[1] != authz.HTTPFilterName {
				t.Fatalf("gateway HTTP filters %v, want jwt_authn then RBAC", got)
			}
			var jwt jwtv3.JwtAuthentication
			mustUnmarshal(t, fs[0], &jwt)
			if p := jwt.GetProviders()["origins-0"]; !p.GetClearRouteCache() || p.GetIssuer() != "https://gw.example" {
				t.Errorf("gateway provider = %v", p)
			}
		}
	}
}

func mustUnmarshal(t *testing.T, f *hcmv3.HttpFilter, m proto.Message) {
	t.Helper()
	if err := f.GetTypedConfig().UnmarshalTo(m); err != nil {
		t.Fatalf("filter %s: %v", f.GetName(), err)
	}
}

// TestJWTTargetRefs: a RequestAuthentication with targetRefs applies to
// the Gateway API gateway it names (by the proxy's gateway-name label, in
// its namespace) and to nothing else; one with a selector does not apply
// to a sidecar whose labels it does not match.
func TestJWTTargetRefs(t *testing.T) {
	pc := authnPush(t, `---
apiVersion: security.istio.io/v1
kind: RequestAuthentication
metadata: {name: by-ref, namespace: istio-system}
spec:
  targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: edge}]
  jwtRules: [{issuer: https://ref.example, jwks: '{"keys":[]}'}]
`)
	issuers := func(ns string, labels map[string]string) []string {
		var out []string
		for _, r := range authz.JWTRules(pc, ns, labels) {
			out = append(out, r.GetIssuer())
		}
		return out
	}
	if got := issuers("istio-system", map[string]string{authz.GatewayNameLabel: "edge"}); !slices.Equal(got, []string{"https://ref.example"}) {
		t.Errorf("gateway edge: issuers %v, want the targetRefs policy's", got)
	}
	if got := issuers("istio-system", map[string]string{authz.GatewayNameLabel: "other"}); len(got) != 0 {
		t.Errorf("gateway other: issuers %v, want none", got)
	}
	if got := issuers("istio-system", map[string]string{"istio": "ingressgateway"}); len(got) != 0 {
		t.Errorf("a non-Gateway-API proxy took a targetRefs policy: %v", got)
	}
	if got := issuers("default", map[string]string{"app": "other"}); len(got) != 0 {
		t.Errorf("app=other took app=web's policy: %v", got)
	}
}
