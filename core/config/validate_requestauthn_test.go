package config_test

import (
	"testing"
)

func ra(spec string) string { return sec1 + "kind: RequestAuthentication\n" + meta + "spec:\n" + spec }

// TestValidateRequestAuthentication: Istio's rules for
// RequestAuthentication, each bad field named by its path.
func TestValidateRequestAuthentication(t *testing.T) {
	const keys = `'{"keys":[{"kty":"RSA","e":"AQAB","n":"AAAA"}]}'`
	checkRows(t, []row{
		{"valid full", ra("  selector: {matchLabels: {app: web}}\n  jwtRules:\n  - issuer: https://a.example\n    audiences: [web]\n    jwks: " + keys +
			"\n    fromHeaders: [{name: x-jwt, prefix: 'Bearer '}]\n    fromParams: [t]\n    fromCookies: [c]\n    outputPayloadToHeader: x-p\n" +
			"    outputClaimToHeaders: [{header: x-sub, claim: sub}]\n    forwardOriginalToken: true\n    timeout: 3s\n"), ""},
		{"valid jwksUri only", ra("  jwtRules: [{jwksUri: 'https://a.example/keys'}]\n"), ""},
		{"valid targetRefs", ra("  targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: gw}]\n  jwtRules: [{issuer: x}]\n"), ""},
		{"no issuer nor uri", ra("  jwtRules: [{audiences: [a]}]\n"), "spec.jwtRules[0].issuer"},
		{"empty audience", ra("  jwtRules: [{issuer: x, audiences: ['']}]\n"), "spec.jwtRules[0].audiences[0]"},
		{"bad uri scheme", ra("  jwtRules: [{issuer: x, jwksUri: 'ftp://a.example/keys'}]\n"), "spec.jwtRules[0].jwksUri"},
		{"uri without host", ra("  jwtRules: [{issuer: x, jwksUri: 'https:///keys'}]\n"), "spec.jwtRules[0].jwksUri"},
		{"jwks garbage", ra("  jwtRules: [{issuer: x, jwks: 'not json'}]\n"), "spec.jwtRules[0].jwks"},
		{"jwks no kty", ra("  jwtRules: [{issuer: x, jwks: '{\"keys\":[{\"n\":\"A\"}]}'}]\n"), "spec.jwtRules[0].jwks"},
		{"empty header name", ra("  jwtRules: [{issuer: x, fromHeaders: [{prefix: a}]}]\n"), "spec.jwtRules[0].fromHeaders[0].name"},
		{"empty param", ra("  jwtRules: [{issuer: x, fromParams: ['']}]\n"), "spec.jwtRules[0].fromParams[0]"},
		{"empty cookie", ra("  jwtRules: [{issuer: x, fromCookies: ['']}]\n"), "spec.jwtRules[0].fromCookies[0]"},
		{"claim header missing", ra("  jwtRules: [{issuer: x, outputClaimToHeaders: [{claim: sub}]}]\n"), "spec.jwtRules[0].outputClaimToHeaders[0]"},
		{"claim header bad", ra("  jwtRules: [{issuer: x, outputClaimToHeaders: [{claim: sub, header: 'x sub'}]}]\n"), "spec.jwtRules[0].outputClaimToHeaders[0].header"},
		{"bad timeout", ra("  jwtRules: [{issuer: x, timeout: 0s}]\n"), "spec.jwtRules[0].timeout"},
		{"selector and targetRefs", ra("  selector: {matchLabels: {a: b}}\n  targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: gw}]\n  jwtRules: [{issuer: x}]\n"), "spec.selector"},
	})
}
