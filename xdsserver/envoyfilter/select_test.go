package envoyfilter_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// marker is an EnvoyFilter (with metadata extra) that appends a buffer
// filter named name to the inbound 8080 HTTP chain; match adds to the
// patch's match.
func marker(name, ns, extraMeta, spec, match string) string {
	return "---\napiVersion: networking.istio.io/v1alpha3\nkind: EnvoyFilter\nmetadata: {name: " + name + ", namespace: " + ns + extraMeta + "}\nspec:\n" + spec + `
  configPatches:
  - applyTo: HTTP_FILTER
    match: {context: SIDECAR_INBOUND, listener: {portNumber: 8080}` + match + `}
    patch:
      operation: ADD
      value: {name: ` + name + `, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.buffer.v3.Buffer, max_request_bytes: 1}}
`
}

// markers are the marker filters the proxy got, in order.
func markers(t *testing.T, r result) []string {
	t.Helper()
	var out []string
	for _, f := range httpFilters(t, inboundChain(t, r.listener(t, "virtualInbound"), 8080)) {
		if strings.HasPrefix(f, "m-") {
			out = append(out, f)
		}
	}
	return out
}

func TestOrder(t *testing.T) {
	// Istio's order: priority; on a tie the root namespace's first; then
	// creation time; then name.
	pc := buildWorld(t, marker("m-late", "default", ", creationTimestamp: '2024-02-01T00:00:00Z'", "", "")+
		marker("m-early", "default", ", creationTimestamp: '2024-01-01T00:00:00Z'", "", "")+
		marker("m-b", "default", ", creationTimestamp: '2024-01-01T00:00:00Z'", "", "")+
		marker("m-root", "istio-system", ", creationTimestamp: '2025-01-01T00:00:00Z'", "", "")+
		marker("m-first", "default", "", "  priority: -5", "")+
		marker("m-last", "istio-system", "", "  priority: 10", ""))
	got := markers(t, apply(t, pc, sidecar(t, nil)))
	want := []string{"m-first", "m-root", "m-b", "m-early", "m-late", "m-last"}
	if !slices.Equal(got, want) {
		t.Errorf("order %v, want %v", got, want)
	}
}

func TestSelection(t *testing.T) {
	for _, tc := range []struct {
		name, spec, match, ns string
		md                    map[string]string
		applies               bool
	}{
		{"root namespace, no selector", "", "", "istio-system", nil, true},
		{"proxy's namespace", "", "", "default", nil, true},
		{"another namespace", "", "", "other", nil, false},
		{"selector matches", "  workloadSelector: {labels: {app: web}}", "", "default", nil, true},
		{"selector does not match", "  workloadSelector: {labels: {app: other}}", "", "default", nil, false},
		{"targetRefs never select a sidecar", "  targetRefs: [{kind: Gateway, group: gateway.networking.k8s.io, name: gw}]", "", "default", nil, false},
		{"proxy version matches", "", `, proxy: {proxyVersion: '^1\.31.*'}`, "default", nil, true},
		{"proxy version does not match", "", `, proxy: {proxyVersion: '^1\.30.*'}`, "default", nil, false},
		{"metadata matches", "", `, proxy: {metadata: {TIER: gold}}`, "default", map[string]string{"TIER": "gold"}, true},
		{"metadata differs", "", `, proxy: {metadata: {TIER: gold}}`, "default", map[string]string{"TIER": "silver"}, false},
		{"metadata absent", "", `, proxy: {metadata: {TIER: gold}}`, "default", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pc := buildWorld(t, marker("m-x", tc.ns, "", tc.spec, tc.match))
			got := markers(t, apply(t, pc, sidecar(t, tc.md)))
			if (len(got) == 1) != tc.applies {
				t.Errorf("markers %v, applies want %v", got, tc.applies)
			}
		})
	}
}

func TestGatewayAPITargetRef(t *testing.T) {
	// A Gateway API gateway (its deployment's gateway-name label) is
	// selected by a targetRef to its Gateway in its namespace.
	pc := buildWorld(t, marker("m-ref", "istio-system", "", "  targetRefs: [{kind: Gateway, group: gateway.networking.k8s.io, name: gw}]", "")+
		ef("gw-ref", "istio-system", `
  targetRefs: [{kind: Gateway, group: gateway.networking.k8s.io, name: gw}]
  configPatches:
  - applyTo: LISTENER
    match: {context: GATEWAY}
    patch: {operation: MERGE, value: {per_connection_buffer_limit_bytes: 1234}}`))
	for _, tc := range []struct {
		label string
		want  uint32
	}{{"gw", 1234}, {"other", 0}} {
		p := node(t, "router~10.0.0.9~gw.istio-system~istio-system.svc.cluster.local",
			map[string]string{"istio": "ingressgateway", "gateway.networking.k8s.io/gateway-name": tc.label}, nil)
		r := apply(t, pc, p)
		if got := r.listener(t, "0.0.0.0_80").GetPerConnectionBufferLimitBytes().GetValue(); got != tc.want {
			t.Errorf("gateway-name %s: buffer limit %d, want %d", tc.label, got, tc.want)
		}
	}
	_ = fmt.Sprint
}
