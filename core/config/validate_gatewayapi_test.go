package config_test

import (
	"testing"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/config/gwapi"
)

const gwapi1 = "apiVersion: gateway.networking.k8s.io/v1\n"

func kgw(spec string) string { return gwapi1 + "kind: Gateway\n" + meta + "spec:\n" + spec }
func hr(spec string) string  { return gwapi1 + "kind: HTTPRoute\n" + meta + "spec:\n" + spec }
func gr(spec string) string  { return gwapi1 + "kind: GRPCRoute\n" + meta + "spec:\n" + spec }

const (
	kgwListener = "  gatewayClassName: istio\n  listeners:\n  - {name: http, port: 80, protocol: HTTP}\n"
	hrParent    = "  parentRefs: [{name: gw}]\n"
)

var gatewayAPIRows = []row{
	{"GatewayClass valid", gwapi1 + "kind: GatewayClass\nmetadata: {name: istio}\nspec: {controllerName: istio.io/gateway-controller}\n", ""},
	{"GatewayClass v1beta1", "apiVersion: gateway.networking.k8s.io/v1beta1\nkind: GatewayClass\nmetadata: {name: istio}\nspec: {controllerName: x.io/y}\n", ""},
	{"GatewayClass needs controller", gwapi1 + "kind: GatewayClass\nmetadata: {name: istio}\nspec: {}\n", "spec.controllerName"},
	{"Gateway valid", kgw(kgwListener + "  addresses: [{value: 10.0.0.1}]\n"), ""},
	{"Gateway unknown field", kgw(kgwListener + "  bogus: 1\n"), "unknown field \"bogus\""},
	{"Gateway needs class", kgw("  listeners: [{name: http, port: 80, protocol: HTTP}]\n"), "spec.gatewayClassName"},
	{"Gateway duplicate listener", kgw("  gatewayClassName: istio\n  listeners:\n  - {name: a, port: 80, protocol: HTTP}\n  - {name: a, port: 81, protocol: HTTP}\n"), "spec.listeners[1].name"},
	{"Gateway bad port", kgw("  gatewayClassName: istio\n  listeners: [{name: a, port: 0, protocol: HTTP}]\n"), "spec.listeners[0].port"},
	{"Gateway bad protocol", kgw("  gatewayClassName: istio\n  listeners: [{name: a, port: 80, protocol: SPDY}]\n"), "spec.listeners[0].protocol"},
	{"Gateway HTTPS needs tls", kgw("  gatewayClassName: istio\n  listeners: [{name: a, port: 443, protocol: HTTPS}]\n"), "spec.listeners[0].tls"},
	{"Gateway HTTPS valid", kgw("  gatewayClassName: istio\n  listeners: [{name: a, port: 443, protocol: HTTPS, hostname: \"*.example.com\", tls: {certificateRefs: [{name: cert}]}}]\n"), ""},
	{"Gateway TCP with hostname", kgw("  gatewayClassName: istio\n  listeners: [{name: a, port: 90, protocol: TCP, hostname: a.example.com}]\n"), "spec.listeners[0].hostname"},
	{"Gateway bad from", kgw("  gatewayClassName: istio\n  listeners: [{name: a, port: 80, protocol: HTTP, allowedRoutes: {namespaces: {from: Some}}}]\n"), "allowedRoutes.namespaces.from"},
	{"Gateway bad address", kgw(kgwListener + "  addresses: [{type: IPAddress, value: nope}]\n"), "spec.addresses[0].value"},
	{"HTTPRoute valid", hr(hrParent + "  hostnames: [a.example.com]\n  rules:\n  - matches: [{path: {type: PathPrefix, value: /a}, headers: [{name: x, value: v1}]}]\n" +
		"    filters: [{type: RequestHeaderModifier, requestHeaderModifier: {set: [{name: a, value: b}]}}]\n" +
		"    backendRefs: [{name: svc, port: 80, weight: 3}]\n    timeouts: {request: 10s}\n"), ""},
	{"HTTPRoute v1beta1", "apiVersion: gateway.networking.k8s.io/v1beta1\nkind: HTTPRoute\n" + meta + "spec:\n" + hrParent, ""},
	{"HTTPRoute bad path", hr(hrParent + "  rules: [{matches: [{path: {type: PathPrefix, value: a}}]}]\n"), "spec.rules[0].matches[0].path.value"},
	{"HTTPRoute bad path type", hr(hrParent + "  rules: [{matches: [{path: {type: Glob, value: /a}}]}]\n"), "spec.rules[0].matches[0].path.type"},
	{"HTTPRoute backend port", hr(hrParent + "  rules: [{backendRefs: [{name: svc}]}]\n"), "spec.rules[0].backendRefs[0].port"},
	{"HTTPRoute weight", hr(hrParent + "  rules: [{backendRefs: [{name: svc, port: 80, weight: -1}]}]\n"), "spec.rules[0].backendRefs[0].weight"},
	{"HTTPRoute filter mismatch", hr(hrParent + "  rules: [{filters: [{type: RequestRedirect, urlRewrite: {hostname: a}}]}]\n"), "spec.rules[0].filters[0]"},
	{"HTTPRoute redirect code", hr(hrParent + "  rules: [{filters: [{type: RequestRedirect, requestRedirect: {statusCode: 200}}]}]\n"), "requestRedirect.statusCode"},
	{"HTTPRoute redirect and rewrite", hr(hrParent + "  rules: [{filters: [{type: RequestRedirect, requestRedirect: {statusCode: 301}}, {type: URLRewrite, urlRewrite: {hostname: a}}]}]\n"), "cannot be used together"},
	{"HTTPRoute bad timeout", hr(hrParent + "  rules: [{timeouts: {request: 10 seconds}}]\n"), "spec.rules[0].timeouts.request"},
	{"HTTPRoute bad hostname", hr(hrParent + "  hostnames: [1.2.3.4]\n"), "spec.hostnames[0]"},
	{"HTTPRoute unknown field", hr(hrParent + "  rules: [{matchez: []}]\n"), "unknown field \"matchez\""},
	{"GRPCRoute valid", gr(hrParent + "  rules:\n  - matches: [{method: {service: echo.Echo, method: Call}}]\n    backendRefs: [{name: svc, port: 7070}]\n"), ""},
	{"GRPCRoute empty method", gr(hrParent + "  rules: [{matches: [{method: {type: Exact}}]}]\n"), "spec.rules[0].matches[0].method"},
	{"HTTPRoute CORS valid", hr(hrParent + "  rules: [{filters: [{type: CORS, cors: {allowOrigins: [\"https://*.example.com\"], allowMethods: [GET], maxAge: 60}}]}]\n"), ""},
	{"HTTPRoute CORS star with others", hr(hrParent + "  rules: [{filters: [{type: CORS, cors: {allowOrigins: [\"*\", \"https://a.example.com\"]}}]}]\n"), "spec.rules[0].filters[0].cors.allowOrigins"},
	{"HTTPRoute CORS unknown field", hr(hrParent + "  rules: [{filters: [{type: CORS, cors: {allowOrigin: [x]}}]}]\n"), "unknown field \"allowOrigin\""},
	{"HTTPRoute CORS bad origin", hr(hrParent + "  rules: [{filters: [{type: CORS, cors: {allowOrigins: [\"https://pre*\"]}}]}]\n"), "spec.rules[0].filters[0].cors.allowOrigins[0]"},
	{"BackendTLSPolicy valid", gwapi1 + "kind: BackendTLSPolicy\n" + meta + "spec:\n  targetRefs: [{group: \"\", kind: Service, name: svc}]\n  validation: {wellKnownCACertificates: System, hostname: a.example.com}\n", ""},
	{"BackendTLSPolicy v1alpha3", "apiVersion: gateway.networking.k8s.io/v1alpha3\nkind: BackendTLSPolicy\n" + meta + "spec:\n  targetRefs: [{group: \"\", kind: Service, name: svc}]\n  validation: {wellKnownCACertificates: System, hostname: a.example.com}\n", ""},
	{"BackendTLSPolicy needs targets", gwapi1 + "kind: BackendTLSPolicy\n" + meta + "spec:\n  validation: {wellKnownCACertificates: System, hostname: a.example.com}\n", "spec.targetRefs"},
	{"BackendTLSPolicy one CA", gwapi1 + "kind: BackendTLSPolicy\n" + meta + "spec:\n  targetRefs: [{group: \"\", kind: Service, name: svc}]\n  validation: {hostname: a.example.com}\n", "spec.validation"},
	{"BackendTLSPolicy wildcard hostname", gwapi1 + "kind: BackendTLSPolicy\n" + meta + "spec:\n  targetRefs: [{group: \"\", kind: Service, name: svc}]\n  validation: {wellKnownCACertificates: System, hostname: \"*.example.com\"}\n", "spec.validation.hostname"},
	{"BackendTLSPolicy SAN type", gwapi1 + "kind: BackendTLSPolicy\n" + meta + "spec:\n  targetRefs: [{group: \"\", kind: Service, name: svc}]\n  validation: {wellKnownCACertificates: System, hostname: a.example.com, subjectAltNames: [{type: IP}]}\n", "spec.validation.subjectAltNames[0].type"},
	{"ListenerSet valid", gwapi1 + "kind: ListenerSet\n" + meta + "spec:\n  parentRef: {name: gw}\n  listeners: [{name: extra, protocol: HTTP, hostname: a.example.com}, {name: tcp, port: 9000, protocol: TCP}]\n", ""},
	{"ListenerSet TCP needs port", gwapi1 + "kind: ListenerSet\n" + meta + "spec:\n  parentRef: {name: gw}\n  listeners: [{name: tcp, protocol: TCP}]\n", "spec.listeners[0].port"},
	{"ListenerSet needs parent", gwapi1 + "kind: ListenerSet\n" + meta + "spec:\n  parentRef: {}\n  listeners: [{name: a, protocol: HTTP}]\n", "spec.parentRef.name"},
	{"GRPCRoute no CORS", gr(hrParent + "  rules: [{filters: [{type: CORS, cors: {allowOrigins: [\"*\"]}}]}]\n"), "spec.rules[0].filters[0].type"},
	{"GRPCRoute backendRef filter type", gr(hrParent + "  rules: [{backendRefs: [{name: svc, port: 80, filters: [{type: URLRewrite, urlRewrite: {hostname: a}}]}]}]\n"), "spec.rules[0].backendRefs[0].filters[0].type"},
	{"GRPCRoute no redirect", gr(hrParent + "  rules: [{filters: [{type: RequestRedirect, requestRedirect: {statusCode: 301}}]}]\n"), "spec.rules[0].filters[0].type"},
	{"TCPRoute valid", "apiVersion: gateway.networking.k8s.io/v1alpha2\nkind: TCPRoute\n" + meta + "spec:\n" + hrParent + "  rules: [{backendRefs: [{name: db, port: 5432}]}]\n", ""},
	{"TLSRoute valid", "apiVersion: gateway.networking.k8s.io/v1alpha2\nkind: TLSRoute\n" + meta + "spec:\n" + hrParent + "  hostnames: [a.example.com]\n  rules: [{backendRefs: [{name: db, port: 443}]}]\n", ""},
	{"TLSRoute v1", gwapi1 + "kind: TLSRoute\n" + meta + "spec:\n" + hrParent, ""},
	{"ReferenceGrant valid", "apiVersion: gateway.networking.k8s.io/v1beta1\nkind: ReferenceGrant\n" + meta + "spec: {from: [{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: a}], to: [{group: \"\", kind: Service}]}\n", ""},
	{"ReferenceGrant empty", "apiVersion: gateway.networking.k8s.io/v1beta1\nkind: ReferenceGrant\n" + meta + "spec: {from: [], to: []}\n", "spec.from"},
	{"Gateway API kind in Istio group", net1 + "kind: HTTPRoute\n" + meta + "spec: {}\n", "unsupported apiVersion"},
	{"KubernetesGateway is not a manifest kind", gwapi1 + "kind: KubernetesGateway\n" + meta + "spec: {}\n", "unknown kind"},
}

// Every served version of every kind reads the same spec.
func init() {
	valid := map[config.Kind]string{
		config.GatewayClass:      "spec: {controllerName: istio.io/gateway-controller}\n",
		config.KubernetesGateway: "spec:\n" + kgwListener,
		config.HTTPRoute:         "spec:\n" + hrParent + "  rules: [{backendRefs: [{name: svc, port: 80}]}]\n",
		config.GRPCRoute:         "spec:\n" + hrParent + "  rules: [{backendRefs: [{name: svc, port: 80}]}]\n",
		config.TCPRoute:          "spec:\n" + hrParent + "  rules: [{backendRefs: [{name: svc, port: 80}]}]\n",
		config.TLSRoute:          "spec:\n" + hrParent + "  rules: [{backendRefs: [{name: svc, port: 443}]}]\n",
		config.ReferenceGrant:    "spec: {from: [{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: a}], to: [{group: \"\", kind: Service}]}\n",
	}
	for k, spec := range valid {
		s := config.SchemaFor(k)
		for _, v := range s.Versions {
			gatewayAPIRows = append(gatewayAPIRows, row{"valid " + s.GVK().Kind + " " + v,
				"apiVersion: " + s.Group + "/" + v + "\nkind: " + s.GVK().Kind + "\n" + meta + spec, ""})
		}
	}
}

func TestGatewayAPIValidation(t *testing.T) {
	checkRows(t, gatewayAPIRows)
}

// A Gateway API Gateway and an Istio Gateway of the same name are two
// resources; the spec decodes to gwapi's types.
func TestGatewayAPIKinds(t *testing.T) {
	k, err := typed(t, kgw(kgwListener))
	if err != nil {
		t.Fatal(err)
	}
	i, err := typed(t, gw(gwServers))
	if err != nil {
		t.Fatal(err)
	}
	if k.Key().Kind != config.KubernetesGateway || i.Key().Kind != config.Gateway {
		t.Fatalf("keys %v and %v", k.Key(), i.Key())
	}
	if got := k.GVK.String(); got != "gateway.networking.k8s.io/v1/Gateway" {
		t.Fatalf("GVK %s", got)
	}
	if got := config.SchemaFor(config.KubernetesGateway).GVK().String(); got != "gateway.networking.k8s.io/v1/Gateway" {
		t.Fatalf("schema GVK %s", got)
	}
	var spec gwapi.GatewaySpec
	if err := config.DecodeSpec(&k, &spec); err != nil {
		t.Fatal(err)
	}
	if spec.GatewayClassName != "istio" || len(spec.Listeners) != 1 || spec.Listeners[0].Port != 80 {
		t.Fatalf("decoded %+v", spec)
	}
	cp := k.DeepCopy()
	if !config.SameContent(&k, &cp) {
		t.Fatal("a deep copy differs")
	}
	st, err := config.StructSpec(spec)
	if err != nil {
		t.Fatal(err)
	}
	cp.Spec = st
	if !config.SameContent(&k, &cp) {
		t.Fatal("re-encoded spec differs")
	}
}
