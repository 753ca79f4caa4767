package model_test

import (
	"strings"
	"testing"
)

const apGhost = `apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: ghost, namespace: ns}
spec:
  selector: {matchLabels: {app: ghost}}
  action: ALLOW
`

const paAll = `apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: default, namespace: ns}
spec:
  mtls: {mode: STRICT}
`

// A security policy whose selector matches no registered workload is
// reported, naming the resource and the field; a matching workload
// clears it; a policy without a selector is never reported.
func TestPolicySelectingNothing(t *testing.T) {
	h := newHarness(t)
	h.put(apGhost, paAll, we("vm1", "10.0.0.1", "reviews"))
	ps := h.reg.Problems()
	if len(ps) != 1 || ps[0].Resource != "AuthorizationPolicy/ns/ghost" || !strings.Contains(ps[0].Error, "spec.selector") {
		t.Fatalf("problems = %+v, want one for AuthorizationPolicy ns/ghost", ps)
	}
	h.put(we("vm2", "10.0.0.2", "ghost"))
	if ps := h.reg.Problems(); len(ps) != 0 {
		t.Fatalf("a matching workload should clear the problem: %+v", ps)
	}
}
