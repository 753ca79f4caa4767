package config_test

import (
	"testing"
)

func tel(spec string) string {
	return "apiVersion: telemetry.istio.io/v1\nkind: Telemetry\n" + meta + "spec:\n" + spec
}

// Istio's Telemetry rules (ValidateTelemetry), each bad input named by
// its field.
var telemetryRows = []row{
	{"valid everything", tel("  selector: {matchLabels: {app: a}}\n" +
		"  accessLogging: [{providers: [{name: envoy}], filter: {expression: \"response.code >= 400 && request.method == 'GET'\"}}]\n" +
		"  tracing: [{providers: [{name: zipkin}], randomSamplingPercentage: 10, customTags: {t: {literal: {value: v}}, h: {header: {name: x-h}}}}]\n" +
		"  metrics: [{providers: [{name: prometheus}], overrides: [{match: {metric: REQUEST_COUNT}, tagOverrides: {a: {value: request.host}, b: {operation: REMOVE}}}]}]\n"), ""},
	{"bad CEL filter", tel("  accessLogging: [{filter: {expression: \"response.code >= \"}}]\n"), "spec.accessLogging[0].filter.expression"},
	{"empty provider name", tel("  tracing: [{providers: [{name: \"\"}]}]\n"), "spec.tracing[0].providers[0].name"},
	{"sampling above 100", tel("  tracing: [{randomSamplingPercentage: 101}]\n"), "spec.tracing[0].randomSamplingPercentage"},
	{"empty literal tag", tel("  tracing: [{customTags: {t: {literal: {value: \"\"}}}}]\n"), "spec.tracing[0].customTags[t].literal.value"},
	{"tag without value", tel("  tracing: [{customTags: {t: {}}}]\n"), "spec.tracing[0].customTags[t]"},
	{"UPSERT without value", tel("  metrics: [{overrides: [{tagOverrides: {a: {operation: UPSERT}}}]}]\n"), "spec.metrics[0].overrides[0].tagOverrides[a].value"},
	{"REMOVE with value", tel("  metrics: [{overrides: [{tagOverrides: {a: {operation: REMOVE, value: x}}}]}]\n"), "may only be set when the operation is UPSERT"},
	{"empty custom metric", tel("  metrics: [{overrides: [{match: {customMetric: \"\"}, disabled: true}]}]\n"), "spec.metrics[0].overrides[0].match.customMetric"},
	{"selector and targetRef", tel("  selector: {matchLabels: {app: a}}\n  targetRef: {kind: Gateway, group: gateway.networking.k8s.io, name: gw}\n"), "only one of selector"},
	{"unknown field", tel("  tracing: [{sampling: 3}]\n"), "unknown field"},
}

func TestTelemetryValidation(t *testing.T) {
	checkRows(t, telemetryRows)
}
