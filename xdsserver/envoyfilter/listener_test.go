package envoyfilter_test

import (
	"slices"
	"strings"
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	tcpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
)

const lua = `
        name: envoy.filters.http.lua
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua
          default_source_code: {inline_string: "function envoy_on_request(h) h:headers():add('x-ef', '1') end"}`

// routerMatch is a listener match on the HTTP connection manager's router.
const routerMatch = `
      listener:
        filterChain:
          filter:
            name: envoy.filters.network.http_connection_manager
            subFilter: {name: envoy.filters.http.router}`

// before returns the name before "envoy.filters.http.router" in fs.
func before(fs []string, name string) string {
	i := slices.Index(fs, name)
	if i <= 0 {
		return ""
	}
	return fs[i-1]
}

func TestHTTPFilterInsertBeforeOutbound(t *testing.T) {
	pc := buildWorld(t, ef("lua", "default", `
  configPatches:
  - applyTo: HTTP_FILTER
    match:
      context: SIDECAR_OUTBOUND`+routerMatch+`
    patch:
      operation: INSERT_BEFORE
      value:`+lua))
	r := apply(t, pc, sidecar(t, nil))
	if len(r.problems) > 0 {
		t.Fatalf("problems: %v", r.problems)
	}
	fs := httpFilters(t, r.listener(t, "0.0.0.0_9080").GetFilterChains()[0])
	if got := before(fs, "envoy.filters.http.router"); got != "envoy.filters.http.lua" {
		t.Errorf("outbound 9080 HTTP filters %v: want lua just before the router", fs)
	}
	// Inbound is another context: untouched.
	in := inboundChain(t, r.listener(t, "virtualInbound"), 8080)
	if fs := httpFilters(t, in); slices.Contains(fs, "envoy.filters.http.lua") {
		t.Errorf("inbound 8080 got the outbound patch: %v", fs)
	}
}

func TestHTTPFilterOperations(t *testing.T) {
	for _, tc := range []struct {
		name, spec string
		want       func([]string) bool
	}{
		{"ADD appends", `
  - applyTo: HTTP_FILTER
    match: {context: SIDECAR_INBOUND, listener: {portNumber: 8080, filterChain: {filter: {name: envoy.filters.network.http_connection_manager}}}}
    patch:
      operation: ADD
      value:` + lua, func(fs []string) bool { return fs[len(fs)-1] == "envoy.filters.http.lua" }},
		{"INSERT_FIRST", `
  - applyTo: HTTP_FILTER
    match: {context: SIDECAR_INBOUND, listener: {portNumber: 8080}}
    patch:
      operation: INSERT_FIRST
      value:` + lua, func(fs []string) bool { return fs[0] == "envoy.filters.http.lua" }},
		{"INSERT_AFTER the first filter", `
  - applyTo: HTTP_FILTER
    match: {context: SIDECAR_INBOUND, listener: {portNumber: 8080}}
    patch:
      operation: INSERT_FIRST
      value: {name: envoy.filters.http.buffer, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.buffer.v3.Buffer, max_request_bytes: 1024}}
  - applyTo: HTTP_FILTER
    match: {context: SIDECAR_INBOUND, listener: {portNumber: 8080, filterChain: {filter: {name: envoy.filters.network.http_connection_manager, subFilter: {name: envoy.filters.http.buffer}}}}}
    patch:
      operation: INSERT_AFTER
      value:` + lua, func(fs []string) bool {
			return len(fs) > 2 && fs[0] == "envoy.filters.http.buffer" && fs[1] == "envoy.filters.http.lua"
		}},
		{"REPLACE the router's neighbour", `
  - applyTo: HTTP_FILTER
    match: {context: SIDECAR_INBOUND, listener: {portNumber: 8080}}
    patch:
      operation: INSERT_FIRST
      value: {name: envoy.filters.http.buffer, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.buffer.v3.Buffer, max_request_bytes: 1024}}
  - applyTo: HTTP_FILTER
    match: {context: SIDECAR_INBOUND, listener: {portNumber: 8080, filterChain: {filter: {name: envoy.filters.network.http_connection_manager, subFilter: {name: envoy.filters.http.buffer}}}}}
    patch:
      operation: REPLACE
      value:` + lua, func(fs []string) bool {
			return fs[0] == "envoy.filters.http.lua" && !slices.Contains(fs, "envoy.filters.http.buffer")
		}},
		{"REMOVE", `
  - applyTo: HTTP_FILTER
    match: {context: SIDECAR_INBOUND, listener: {portNumber: 8080}}
    patch:
      operation: INSERT_FIRST
      value: {name: envoy.filters.http.buffer, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.buffer.v3.Buffer, max_request_bytes: 1024}}
  - applyTo: HTTP_FILTER
    match: {context: SIDECAR_INBOUND, listener: {portNumber: 8080, filterChain: {filter: {name: envoy.filters.network.http_connection_manager, subFilter: {name: envoy.filters.http.buffer}}}}}
    patch: {operation: REMOVE}`, func(fs []string) bool { return !slices.Contains(fs, "envoy.filters.http.buffer") }},
		{"a port that is not the chain's: nothing", `
  - applyTo: HTTP_FILTER
    match: {context: SIDECAR_INBOUND, listener: {portNumber: 7777}}
    patch:
      operation: INSERT_FIRST
      value:` + lua, func(fs []string) bool { return !slices.Contains(fs, "envoy.filters.http.lua") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pc := buildWorld(t, ef("f", "default", "  configPatches:"+tc.spec))
			r := apply(t, pc, sidecar(t, nil))
			if len(r.problems) > 0 {
				t.Fatalf("problems: %v", r.problems)
			}
			fs := httpFilters(t, inboundChain(t, r.listener(t, "virtualInbound"), 8080))
			if !tc.want(fs) {
				t.Errorf("inbound 8080 HTTP filters: %v", fs)
			}
		})
	}
}

func TestHTTPFilterMergeRouter(t *testing.T) {
	pc := buildWorld(t, ef("merge", "default", `
  configPatches:
  - applyTo: HTTP_FILTER
    match:
      context: SIDECAR_OUTBOUND`+routerMatch+`
    patch:
      operation: MERGE
      value:
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
          suppress_envoy_headers: true`))
	r := apply(t, pc, sidecar(t, nil))
	h := hcm(t, r.listener(t, "0.0.0.0_9080").GetFilterChains()[0])
	rt := &routerv3.Router{}
	f := h.GetHttpFilters()[len(h.GetHttpFilters())-1]
	if err := f.GetTypedConfig().UnmarshalTo(rt); err != nil {
		t.Fatal(err)
	}
	if f.GetName() != "envoy.filters.http.router" || !rt.GetSuppressEnvoyHeaders() {
		t.Errorf("router after MERGE: %s %v", f.GetName(), rt)
	}
}

func TestNetworkFilters(t *testing.T) {
	pc := buildWorld(t, ef("net", "default", `
  configPatches:
  - applyTo: NETWORK_FILTER
    match: {context: SIDECAR_OUTBOUND, listener: {name: 10.1.0.5_5432, filterChain: {filter: {name: envoy.filters.network.tcp_proxy}}}}
    patch:
      operation: MERGE
      value: {typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy, idle_timeout: 7s}}
  - applyTo: NETWORK_FILTER
    match: {context: SIDECAR_OUTBOUND, listener: {name: 10.1.0.5_5432, filterChain: {filter: {name: envoy.filters.network.tcp_proxy}}}}
    patch:
      operation: INSERT_BEFORE
      value:
        name: envoy.filters.network.connection_limit
        typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.network.connection_limit.v3.ConnectionLimit, stat_prefix: db, max_connections: 10}
  - applyTo: NETWORK_FILTER
    match: {context: SIDECAR_INBOUND, listener: {portNumber: 9000, filterChain: {filter: {name: envoy.filters.network.tcp_proxy}}}}
    patch: {operation: REMOVE}`))
	r := apply(t, pc, sidecar(t, nil))
	if len(r.problems) > 0 {
		t.Fatalf("problems: %v", r.problems)
	}
	fc := r.listener(t, "10.1.0.5_5432").GetFilterChains()[0]
	nf := networkFilters(fc)
	if before(nf, "envoy.filters.network.tcp_proxy") != "envoy.filters.network.connection_limit" {
		t.Errorf("db chain filters %v: want connection_limit before tcp_proxy", nf)
	}
	tp := &tcpv3.TcpProxy{}
	if err := fc.GetFilters()[len(fc.GetFilters())-1].GetTypedConfig().UnmarshalTo(tp); err != nil {
		t.Fatal(err)
	}
	if tp.GetIdleTimeout().AsDuration().Seconds() != 7 || tp.GetCluster() == "" && tp.GetWeightedClusters() == nil {
		t.Errorf("tcp_proxy after MERGE: %v", tp)
	}
	// The inbound 9000 chain lost its tcp_proxy: its filter list holds
	// what remains (a chain with no filters left is removed).
	for _, fc := range r.listener(t, "virtualInbound").GetFilterChains() {
		if fc.GetFilterChainMatch().GetDestinationPort().GetValue() == 9000 && slices.Contains(networkFilters(fc), "envoy.filters.network.tcp_proxy") {
			t.Errorf("inbound 9000 still has tcp_proxy: %v", networkFilters(fc))
		}
	}
}

func TestListenerAndFilterChain(t *testing.T) {
	pc := buildWorld(t, ef("lis", "default", `
  configPatches:
  - applyTo: LISTENER
    match: {context: SIDECAR_OUTBOUND, listener: {portNumber: 9080}}
    patch: {operation: MERGE, value: {per_connection_buffer_limit_bytes: 4096}}
  - applyTo: LISTENER
    match: {listener: {name: 0.0.0.0_9000}}
    patch: {operation: REMOVE}
  - applyTo: LISTENER
    match: {context: SIDECAR_OUTBOUND}
    patch:
      operation: ADD
      value:
        name: extra
        address: {socket_address: {address: 127.0.0.1, port_value: 7001}}
        filter_chains: [{filters: [{name: envoy.filters.network.tcp_proxy, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy, stat_prefix: extra, cluster: BlackHoleCluster}}]}]
  - applyTo: FILTER_CHAIN
    match: {context: SIDECAR_INBOUND, listener: {portNumber: 8080, filterChain: {transportProtocol: raw_buffer}}}
    patch: {operation: MERGE, value: {name: merged-chain}}
  - applyTo: LISTENER_FILTER
    match: {context: SIDECAR_OUTBOUND, listener: {name: virtualOutbound}}
    patch:
      operation: INSERT_FIRST
      value: {name: envoy.filters.listener.proxy_protocol, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.listener.proxy_protocol.v3.ProxyProtocol}}`))
	r := apply(t, pc, sidecar(t, nil))
	if len(r.problems) > 0 {
		t.Fatalf("problems: %v", r.problems)
	}
	if got := r.listener(t, "0.0.0.0_9080").GetPerConnectionBufferLimitBytes().GetValue(); got != 4096 {
		t.Errorf("9080 buffer limit %d, want 4096", got)
	}
	if _, ok := r.res["lds"]["0.0.0.0_9000"]; ok {
		t.Error("0.0.0.0_9000 not removed")
	}
	r.listener(t, "extra")
	if n := strings.Count(strings.Join(r.order["lds"], ","), "extra"); n != 1 {
		t.Errorf("the added listener appears %d times", n)
	}
	named := 0
	for _, fc := range r.listener(t, "virtualInbound").GetFilterChains() {
		if fc.GetName() == "merged-chain" {
			named++
			if fc.GetFilterChainMatch().GetDestinationPort().GetValue() != 8080 || fc.GetFilterChainMatch().GetTransportProtocol() != "raw_buffer" {
				t.Errorf("merged the wrong chain: %v", fc.GetFilterChainMatch())
			}
		}
	}
	if named == 0 {
		t.Error("no inbound chain renamed by the FILTER_CHAIN MERGE")
	}
	lf := r.listener(t, "virtualOutbound").GetListenerFilters()
	if len(lf) == 0 || lf[0].GetName() != "envoy.filters.listener.proxy_protocol" {
		t.Errorf("virtualOutbound listener filters: %v", lf)
	}
}

func TestFilterChainRemove(t *testing.T) {
	pc := buildWorld(t, ef("fc", "default", `
  configPatches:
  - applyTo: FILTER_CHAIN
    match: {context: SIDECAR_INBOUND, listener: {portNumber: 9000}}
    patch: {operation: REMOVE}`))
	r := apply(t, pc, sidecar(t, nil))
	for _, fc := range r.listener(t, "virtualInbound").GetFilterChains() {
		if fc.GetFilterChainMatch().GetDestinationPort().GetValue() == 9000 {
			t.Errorf("chain for 9000 kept: %s", fc.GetName())
		}
	}
	var _ *listenerv3.FilterChain
}

func TestGatewayContext(t *testing.T) {
	pc := buildWorld(t, ef("gw", "istio-system", `
  workloadSelector: {labels: {istio: ingressgateway}}
  configPatches:
  - applyTo: HTTP_FILTER
    match:
      context: GATEWAY`+routerMatch+`
    patch:
      operation: INSERT_BEFORE
      value:`+lua+`
  - applyTo: HTTP_FILTER
    match:
      context: SIDECAR_OUTBOUND`+routerMatch+`
    patch:
      operation: INSERT_FIRST
      value: {name: sidecar-only, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.buffer.v3.Buffer, max_request_bytes: 1}}`))
	r := apply(t, pc, gateway(t))
	fs := httpFilters(t, r.listener(t, "0.0.0.0_80").GetFilterChains()[0])
	if before(fs, "envoy.filters.http.router") != "envoy.filters.http.lua" || slices.Contains(fs, "sidecar-only") {
		t.Errorf("gateway HTTP filters: %v", fs)
	}
	// The selector does not select the sidecar.
	r = apply(t, pc, sidecar(t, nil))
	if fs := httpFilters(t, r.listener(t, "0.0.0.0_9080").GetFilterChains()[0]); slices.Contains(fs, "sidecar-only") {
		t.Errorf("sidecar got a gateway-selected filter: %v", fs)
	}
}
