package config_test

import (
	"testing"
)

func envoyFilter(spec string) string {
	return "apiVersion: networking.istio.io/v1alpha3\nkind: EnvoyFilter\n" + meta + "spec:\n" + spec
}

// Istio's structural EnvoyFilter rules, each bad input named by its
// field. A value that does not decode into its Envoy type is not a
// validation error: it skips that patch only (xdsserver/envoyfilter).
var envoyFilterRows = []row{
	{"valid", envoyFilter("  workloadSelector: {labels: {app: a}}\n  priority: -1\n  configPatches:\n" +
		"  - applyTo: HTTP_FILTER\n    match: {context: SIDECAR_INBOUND, proxy: {proxyVersion: '^1\\.31.*'}, listener: {portNumber: 80, filterChain: {filter: {name: envoy.filters.network.http_connection_manager, subFilter: {name: envoy.filters.http.router}}}}}\n" +
		"    patch: {operation: INSERT_BEFORE, value: {name: envoy.filters.http.buffer}}\n" +
		"  - applyTo: CLUSTER\n    match: {cluster: {service: a.example.com}}\n    patch: {operation: REMOVE}\n"), ""},
	{"undecodable value is not a validation error", envoyFilter("  configPatches:\n  - applyTo: CLUSTER\n    patch: {operation: MERGE, value: {connect_timeout: soon}}\n"), ""},
	{"missing applyTo", envoyFilter("  configPatches:\n  - patch: {operation: REMOVE}\n"), "spec.configPatches[0].applyTo"},
	{"missing patch", envoyFilter("  configPatches:\n  - applyTo: CLUSTER\n"), "spec.configPatches[0].patch"},
	{"missing operation", envoyFilter("  configPatches:\n  - applyTo: CLUSTER\n    patch: {value: {name: x}}\n"), "spec.configPatches[0].patch.operation"},
	{"MERGE without value", envoyFilter("  configPatches:\n  - applyTo: CLUSTER\n    patch: {operation: MERGE}\n"), "spec.configPatches[0].patch.value"},
	{"bad proxyVersion regex", envoyFilter("  configPatches:\n  - applyTo: CLUSTER\n    match: {proxy: {proxyVersion: '^1\\.(31'}}\n    patch: {operation: REMOVE}\n"), "spec.configPatches[0].match.proxy.proxyVersion"},
	{"cluster match for a listener object", envoyFilter("  configPatches:\n  - applyTo: HTTP_FILTER\n    match: {cluster: {name: x}}\n    patch: {operation: REMOVE}\n"), "needs a listener match"},
	{"listener match for a cluster", envoyFilter("  configPatches:\n  - applyTo: CLUSTER\n    match: {listener: {name: x}}\n    patch: {operation: REMOVE}\n"), "needs a cluster match"},
	{"listener match for a route", envoyFilter("  configPatches:\n  - applyTo: HTTP_ROUTE\n    match: {listener: {name: x}}\n    patch: {operation: REMOVE}\n"), "needs a routeConfiguration match"},
	{"filter match without a name", envoyFilter("  configPatches:\n  - applyTo: NETWORK_FILTER\n    match: {listener: {filterChain: {filter: {}}}}\n    patch: {operation: REMOVE}\n"), "spec.configPatches[0].match.listener.filterChain.filter.name"},
	{"subFilter for a network filter", envoyFilter("  configPatches:\n  - applyTo: NETWORK_FILTER\n    match: {listener: {filterChain: {filter: {name: envoy.filters.network.http_connection_manager, subFilter: {name: x}}}}}\n    patch: {operation: REMOVE}\n"), "for applyTo HTTP_FILTER only"},
	{"subFilter outside the HCM", envoyFilter("  configPatches:\n  - applyTo: HTTP_FILTER\n    match: {listener: {filterChain: {filter: {name: envoy.filters.network.tcp_proxy, subFilter: {name: x}}}}}\n    patch: {operation: REMOVE}\n"), "needs the filter match envoy.filters.network.http_connection_manager"},
	{"selector and targetRefs", envoyFilter("  workloadSelector: {labels: {app: a}}\n  targetRefs: [{kind: Gateway, group: gateway.networking.k8s.io, name: gw}]\n  configPatches:\n  - applyTo: CLUSTER\n    patch: {operation: REMOVE}\n"), "only one of workloadSelector and targetRefs"},
	{"targetRef without a name", envoyFilter("  targetRefs: [{kind: Gateway, group: gateway.networking.k8s.io}]\n"), "spec.targetRefs[0].name"},
	{"unknown field", envoyFilter("  configPatch: []\n"), "unknown field"},
}

func TestEnvoyFilterValidation(t *testing.T) {
	checkRows(t, envoyFilterRows)
}
