package envoyfilter_test

import (
	"testing"

	"github.com/baremesh/baremesh/xdsserver/gen/gentest"
)

// FuzzEnvoyFilter applies arbitrary EnvoyFilter specs to the world's
// sidecar and gateway: whatever the patches, nothing panics, the
// generated resources are not altered and every resource sent passes
// ValidateAll (apply checks all three).
func FuzzEnvoyFilter(f *testing.F) {
	for _, seed := range []string{
		"  configPatches:\n  - applyTo: HTTP_FILTER\n    match: {context: SIDECAR_OUTBOUND}\n    patch: {operation: INSERT_FIRST, value: {name: x, typed_config: {\"@type\": type.googleapis.com/envoy.extensions.filters.http.buffer.v3.Buffer, max_request_bytes: 1}}}\n",
		"  configPatches:\n  - applyTo: CLUSTER\n    patch: {operation: MERGE, value: {connect_timeout: -1s}}\n",
		"  configPatches:\n  - applyTo: LISTENER\n    patch: {operation: MERGE, value: {connection_balance_config: {}}}\n",
		"  configPatches:\n  - applyTo: HTTP_ROUTE\n    match: {routeConfiguration: {vhost: {route: {action: 7}}}}\n    patch: {operation: MERGE, value: {route: {timeout: 1s}}}\n",
		"  configPatches:\n  - applyTo: VIRTUAL_HOST\n    patch: {operation: REPLACE, value: {name: x}}\n",
		"  configPatches:\n  - applyTo: FILTER_CHAIN\n    patch: {operation: MERGE_AND_REPLACE_LIST, value: {filters: []}}\n",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		pc, err := gentest.Build([]byte(world), []byte(ef("fuzz", "istio-system", spec)))
		if err != nil {
			return // not a valid EnvoyFilter: the source rejects it
		}
		apply(t, pc, sidecar(t, nil))
		apply(t, pc, gateway(t))
	})
}
