package envoyfilter_test

import (
	"slices"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"strings"
	"testing"
	"time"
)

// problemsOf are r's problems as text.
func problemsOf(r result) []string {
	var out []string
	for _, p := range r.problems {
		out = append(out, p.String())
	}
	return out
}

func wantProblem(t *testing.T, r result, parts ...string) {
	t.Helper()
	for _, p := range problemsOf(r) {
		ok := true
		for _, s := range parts {
			ok = ok && strings.Contains(p, s)
		}
		if ok {
			return
		}
	}
	t.Errorf("no problem with %q among %q", parts, problemsOf(r))
}

func TestBadValueSkipsThatPatchOnly(t *testing.T) {
	pc := buildWorld(t, ef("bad", "default", `
  configPatches:
  - applyTo: HTTP_FILTER
    match: {context: SIDECAR_INBOUND, listener: {portNumber: 8080}}
    patch:
      operation: INSERT_FIRST
      value: {name: unknown-type, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.nonesuch.v3.Nonesuch}}
  - applyTo: CLUSTER
    match: {cluster: {name: outbound|9080||reviews.default.svc.cluster.local}}
    patch: {operation: MERGE, value: {connect_timeout: not-a-duration}}
  - applyTo: CLUSTER
    match: {cluster: {name: outbound|9080||reviews.default.svc.cluster.local}}
    patch: {operation: MERGE, value: {per_connection_buffer_limit_bytes: 2048}}
  - applyTo: BOOTSTRAP
    patch: {operation: MERGE, value: {node: {id: x}}}
  - applyTo: EXTENSION_CONFIG
    patch: {operation: ADD, value: {name: x}}`))
	r := apply(t, pc, sidecar(t, nil))
	wantProblem(t, r, "EnvoyFilter default/bad", "configPatches[0]", "nonesuch")
	wantProblem(t, r, "configPatches[1]", "envoy.config.cluster.v3.Cluster")
	wantProblem(t, r, "configPatches[3]", "BOOTSTRAP is not applicable")
	wantProblem(t, r, "configPatches[4]", "no ECDS")
	if len(r.problems) != 4 {
		t.Errorf("problems %q, want 4", problemsOf(r))
	}
	if got := r.cluster(t, "outbound|9080||reviews.default.svc.cluster.local").GetPerConnectionBufferLimitBytes().GetValue(); got != 2048 {
		t.Errorf("the good patch of the same filter: buffer limit %d, want 2048", got)
	}
}

func TestInvalidResultSendsUnpatched(t *testing.T) {
	// Each patch decodes, but two make resources Envoy would reject: a
	// negative connect timeout, an HTTP filter without a name. They are
	// skipped; the other patches on the same resources stay.
	pc := buildWorld(t, ef("breaks", "default", `
  configPatches:
  - applyTo: CLUSTER
    match: {context: SIDECAR_OUTBOUND, cluster: {service: reviews.default.svc.cluster.local}}
    patch: {operation: MERGE, value: {connect_timeout: -1s}}
  - applyTo: CLUSTER
    match: {context: SIDECAR_OUTBOUND, cluster: {service: reviews.default.svc.cluster.local}}
    patch: {operation: MERGE, value: {per_connection_buffer_limit_bytes: 2048}}
  - applyTo: HTTP_FILTER
    match: {context: SIDECAR_INBOUND, listener: {portNumber: 8080}}
    patch:
      operation: INSERT_FIRST
      value: {typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.buffer.v3.Buffer, max_request_bytes: 1}}
  - applyTo: HTTP_FILTER
    match: {context: SIDECAR_INBOUND, listener: {portNumber: 8080}}
    patch:
      operation: INSERT_FIRST
      value: {name: good, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.buffer.v3.Buffer, max_request_bytes: 1}}
  - applyTo: CLUSTER
    patch: {operation: ADD, value: {type: STATIC}}
  - applyTo: HTTP_FILTER
    match: {context: SIDECAR_OUTBOUND, listener: {portNumber: 9080, filterChain: {filter: {name: envoy.filters.network.http_connection_manager, subFilter: {name: envoy.filters.http.router}}}}}
    patch:
      operation: MERGE
      value: {typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.buffer.v3.Buffer, max_request_bytes: 1}}`))
	p := sidecar(t, nil)
	r := apply(t, pc, p)
	orig := generated(t, pc, p)
	for _, name := range []string{"outbound|9080||reviews.default.svc.cluster.local", "outbound|9080|v1|reviews.default.svc.cluster.local"} {
		c := r.cluster(t, name)
		if c.GetPerConnectionBufferLimitBytes().GetValue() != 2048 {
			t.Errorf("%s: the valid patch was dropped too", name)
		}
		if d := c.GetConnectTimeout().AsDuration(); d <= 0 || d == -time.Second {
			t.Errorf("%s: connect timeout %v sent", name, d)
		}
		wantProblem(t, r, "configPatches[0]", name, "invalid", "ConnectTimeout")
	}
	fs := httpFilters(t, inboundChain(t, r.listener(t, "virtualInbound"), 8080))
	if fs[0] != "good" || slices.Contains(fs, "") {
		t.Errorf("inbound 8080 filters %q: want the named one first and no unnamed one", fs)
	}
	wantProblem(t, r, "configPatches[2]", "virtualInbound", "invalid")
	wantProblem(t, r, "configPatches[4]", "not added")
	wantProblem(t, r, "configPatches[5]", "0.0.0.0_9080", "cannot merge")
	// The router is the generated one where the mismatched MERGE was skipped.
	var want []string
	for _, x := range orig["type.googleapis.com/envoy.config.listener.v3.Listener"] {
		if x.Name == "0.0.0.0_9080" {
			want = httpFilters(t, x.Resource.(*listenerv3.Listener).GetFilterChains()[0])
		}
	}
	if got := httpFilters(t, r.listener(t, "0.0.0.0_9080").GetFilterChains()[0]); !slices.Equal(got, want) {
		t.Errorf("9080 filters %q, want the generated %q", got, want)
	}
}
