package gatewayapi_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/gatewayapi"
)

// TestConsumerRoute (GAMMA): a mesh route in another namespace than its
// parent service's (a consumer route) routes its own namespace's proxies
// only: the VirtualService is exported to "." (istiod's behaviour, parity
// gatewayapi/mesh-consumer); a producer route (the service's namespace)
// is exported everywhere.
func TestConsumerRoute(t *testing.T) {
	in := input(t, `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: consumer, namespace: shop}
spec:
  parentRefs: [{group: "", kind: Service, name: echo, namespace: apps}]
  rules: [{backendRefs: [{name: echo-v2, namespace: apps, port: 80}]}]
`, `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: producer, namespace: apps}
spec:
  parentRefs: [{group: "", kind: Service, name: echo}]
  rules: [{backendRefs: [{name: echo-v1, port: 80}]}]
`)
	out := gatewayapi.Convert(in)
	got := map[string][]string{}
	for _, vs := range out.VirtualServices {
		got[vs.Namespace+"/"+vs.Name] = vs.Spec.(*networking.VirtualService).GetExportTo()
	}
	want := map[string][]string{"apps/apps~echo.apps.svc.cluster.local": nil, "shop/shop~echo.apps.svc.cluster.local": {"."}}
	if len(got) != len(want) {
		t.Fatalf("virtual services %v, want %v", got, want)
	}
	for k, w := range want {
		if g, ok := got[k]; !ok || !slices.Equal(g, w) {
			t.Errorf("%s: exportTo %v (present %v), want %v", k, g, ok, w)
		}
	}
}

// TestCORSFilter: the CORS filter becomes the route's corsPolicy as
// istiod converts it (origins "*", exact, trailing "*" and other
// wildcards; maxAge 5 s by default; unmatched preflights ignored).
func TestCORSFilter(t *testing.T) {
	in := input(t, gateway, `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: cors, namespace: istio-system}
spec:
  parentRefs: [{name: gw, sectionName: same}]
  rules:
  - filters:
    - type: CORS
      cors:
        allowOrigins: ["https://exact.example.com", "https://*", "https://*.example.com"]
        allowCredentials: true
        allowMethods: [GET, POST]
        allowHeaders: [x-a]
        exposeHeaders: [x-b]
    backendRefs: [{name: echo, port: 80}]
  - matches: [{path: {value: /any}}]
    filters: [{type: CORS, cors: {allowOrigins: ["*"], maxAge: 60}}]
    backendRefs: [{name: echo, port: 80}]
`)
	out := gatewayapi.Convert(in)
	if len(out.VirtualServices) != 1 {
		t.Fatalf("virtual services: %d", len(out.VirtualServices))
	}
	http := out.VirtualServices[0].Spec.(*networking.VirtualService).GetHttp()
	if len(http) != 2 {
		t.Fatalf("routes: %d", len(http))
	}
	want := []string{
		`{"allowOrigins":[{"regex":"^[a-zA-Z][a-zA-Z0-9+.-]*://[^/\\s?#]+$"}],"maxAge":"60s","unmatchedPreflights":"IGNORE"}`,
		`{"allowOrigins":[{"exact":"https://exact.example.com"},{"prefix":"https://"},{"regex":"^https://.*\\.example\\.com$"}],"allowMethods":["GET","POST"],"allowHeaders":["x-a"],"exposeHeaders":["x-b"],"maxAge":"5s","allowCredentials":true,"unmatchedPreflights":"IGNORE"}`,
	}
	for i, hr := range http {
		if got := jsMsg(t, hr.GetCorsPolicy()); got != want[i] {
			t.Errorf("route %d (%s) corsPolicy\n got %s\nwant %s", i, hr.GetName(), got, want[i])
		}
	}
}

func jsMsg(t *testing.T, m proto.Message) string {
	b, err := protojson.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return strings.ReplaceAll(string(b), " ", "")
}

// TestUnsupportedFilters: ExternalAuth and ExtensionRef filters, which
// istiod's conversion refuses too, leave the route not accepted on its
// parent (reason UnsupportedValue) and convert to no routes.
func TestUnsupportedFilters(t *testing.T) {
	for _, f := range []string{
		`{type: ExternalAuth, externalAuth: {protocol: HTTP, backendRef: {name: authz, port: 80}, http: {}}}`,
		`{type: ExtensionRef, extensionRef: {group: example.com, kind: Thing, name: x}}`,
	} {
		in := input(t, gateway, `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r, namespace: istio-system}
spec:
  parentRefs: [{name: gw, sectionName: same}]
  rules: [{filters: [`+f+`], backendRefs: [{name: echo, port: 80}]}]
`)
		out := gatewayapi.Convert(in)
		if len(out.VirtualServices) != 0 {
			t.Errorf("%s: %d virtual services, want none", f, len(out.VirtualServices))
		}
		st := out.Status[config.Key{Kind: config.HTTPRoute, Namespace: "istio-system", Name: "r"}]
		if st == nil || len(st.Parents) != 1 {
			t.Fatalf("%s: route status %+v", f, st)
		}
		var accepted gatewayapi.Condition
		for _, c := range st.Parents[0].Conditions {
			if c.Type == "Accepted" {
				accepted = c
			}
		}
		if accepted.Status != "False" || accepted.Reason != "UnsupportedValue" {
			t.Errorf("%s: Accepted %+v, want False UnsupportedValue", f, accepted)
		}
	}
}

// TestFrontendValidationFailsClosed: a Gateway asking for client
// certificate validation (spec.tls.frontend), which baremesh does not
// do, gets no HTTPS listener (not programmed) rather than one that takes
// any client; its HTTP listener is served.
func TestFrontendValidationFailsClosed(t *testing.T) {
	in := input(t, `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: mtls, namespace: edge}
spec:
  gatewayClassName: istio
  tls: {frontend: {default: {validation: {caCertificateRefs: [{group: "", kind: ConfigMap, name: client-ca}]}}}}
  listeners:
  - {name: https, port: 443, protocol: HTTPS, tls: {certificateRefs: [{name: cert}]}}
  - {name: http, port: 80, protocol: HTTP}
`)
	out := gatewayapi.Convert(in)
	var names []string
	for _, g := range out.Gateways {
		names = append(names, g.Name)
	}
	if !slices.Equal(names, []string{gatewayapi.InternalGatewayName("mtls", "http")}) {
		t.Errorf("converted gateways %v, want the http listener's only", names)
	}
	st := out.Status[config.Key{Kind: config.KubernetesGateway, Namespace: "edge", Name: "mtls"}]
	if c, _ := st.Condition("Programmed"); c.Status != "False" {
		t.Errorf("gateway Programmed %+v, want False", c)
	}
}

// TestListenerSet: a ListenerSet's listeners become Gateways named after
// it, bound to the parent's proxies, when the parent allows its
// namespace (allowedListeners; none by default); a route attaches with a
// ListenerSet parentRef (parity gatewayapi/listenerset).
func TestListenerSet(t *testing.T) {
	in := input(t, `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: edge}
spec:
  gatewayClassName: istio
  allowedListeners: {namespaces: {from: Same}}
  listeners: [{name: http, port: 80, protocol: HTTP}]
`, `apiVersion: gateway.networking.k8s.io/v1
kind: ListenerSet
metadata: {name: more, namespace: edge}
spec:
  parentRef: {name: gw}
  listeners: [{name: web, protocol: HTTP, hostname: web.example.com}]
`, `apiVersion: gateway.networking.k8s.io/v1
kind: ListenerSet
metadata: {name: other, namespace: apps}
spec:
  parentRef: {name: gw, namespace: edge}
  listeners: [{name: web, port: 81, protocol: HTTP}]
`, `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r, namespace: edge}
spec:
  parentRefs: [{kind: ListenerSet, name: more}]
  rules: [{backendRefs: [{name: echo, port: 80}]}]
`)
	out := gatewayapi.Convert(in)
	gws := map[string]string{}
	for _, g := range out.Gateways {
		s := g.Spec.(*networking.Gateway)
		gws[g.Namespace+"/"+g.Name] = s.GetSelector()[gatewayapi.GatewayNameLabel] + " " + s.GetServers()[0].GetHosts()[0] + " " + strconv.Itoa(int(s.GetServers()[0].GetPort().GetNumber()))
	}
	want := map[string]string{
		"edge/" + gatewayapi.InternalGatewayName("gw", "http"):  "gw edge/* 80",
		"edge/" + gatewayapi.InternalGatewayName("more", "web"): "gw edge/web.example.com 80",
	}
	if len(gws) != len(want) {
		t.Fatalf("gateways %v, want %v", gws, want)
	}
	for k, w := range want {
		if gws[k] != w {
			t.Errorf("%s: %q, want %q", k, gws[k], w)
		}
	}
	if len(out.VirtualServices) != 1 || out.VirtualServices[0].Spec.(*networking.VirtualService).GetGateways()[0] != "edge/"+gatewayapi.InternalGatewayName("more", "web") {
		t.Errorf("virtual services %v, want one bound to the ListenerSet's listener", out.VirtualServices)
	}
	if c, _ := out.Status[config.Key{Kind: config.ListenerSet, Namespace: "apps", Name: "other"}].Condition("Accepted"); c.Status != "False" || c.Reason != "NotAllowed" {
		t.Errorf("apps/other Accepted %+v, want False NotAllowed", c)
	}
}
