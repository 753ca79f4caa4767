package analyze

import (
	"strings"
	"testing"

	"github.com/baremesh/baremesh/sources/file"
)

const gwBase = `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: edge}
spec:
  gatewayClassName: istio
  listeners:
  - {name: http, port: 80, protocol: HTTP}
  - {name: https, port: 443, protocol: HTTPS, tls: {certificateRefs: [{name: c, namespace: secrets}]}}
`

// TestGatewayAPIChecks: an unbound route, a missing ReferenceGrant, an
// unknown backend, a listener whose certificate is not permitted and a
// BackendTLSPolicy whose target does not exist are
// reported with file:line; a clean route is not.
func TestGatewayAPIChecks(t *testing.T) {
	src := base + "---\n" + gwBase + `---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: good, namespace: edge}
spec:
  parentRefs: [{name: gw, sectionName: http}]
  rules: [{backendRefs: [{group: networking.istio.io, kind: Hostname, name: web.ns.mesh, port: 80}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: unbound, namespace: ns}
spec:
  parentRefs: [{name: gw, namespace: edge}]
  rules: [{backendRefs: [{group: networking.istio.io, kind: Hostname, name: web.ns.mesh, port: 80}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: cross, namespace: edge}
spec:
  parentRefs: [{name: gw, sectionName: http}]
  rules: [{backendRefs: [{name: web, namespace: ns, port: 80}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: unknown, namespace: edge}
spec:
  parentRefs: [{name: gw, sectionName: http}]
  rules: [{backendRefs: [{name: nothere, port: 80}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: nogw, namespace: edge}
spec:
  parentRefs: [{name: missing}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: BackendTLSPolicy
metadata: {name: notarget, namespace: edge}
spec:
  targetRefs: [{group: networking.istio.io, kind: ServiceEntry, name: nothere}]
  validation: {wellKnownCACertificates: System, hostname: a.example.com}
`
	cfgs, errs := file.Parse([]byte(src), "case.yaml", "test")
	if len(errs) > 0 {
		t.Fatalf("parse: %v", errs)
	}
	var got []string
	for _, m := range Analyze(cfgs) {
		got = append(got, m.Code.ID+" "+string(m.Resource.Kind)+"/"+m.Resource.Name+": "+m.Text)
		if m.Source.File != "case.yaml" || m.Source.Line == 0 {
			t.Errorf("%s: no file:line", m)
		}
	}
	want := []string{
		"BM0002 HTTPRoute/unbound: parentRefs[0] (Gateway edge/gw): not attached: NotAllowedByListeners",
		"BM0003 HTTPRoute/cross: backendRef web/ns not accessible to a HTTPRoute in namespace \"edge\" (missing a ReferenceGrant?)",
		"IST0101 HTTPRoute/unknown: Referenced backend not found: backend(nothere.edge.svc.cluster.local) not found",
		"BM0002 GRPCRoute/nogw: parentRefs[0] (Gateway edge/missing): not attached: NoMatchingParent",
		"BM0004 KubernetesGateway/gw: listener https not programmed: Bad TLS configuration",
		"BM0005 BackendTLSPolicy/notarget: not applied: TargetNotFound",
	}
	if len(got) != len(want) {
		t.Fatalf("got %d messages, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for _, w := range want {
		found := false
		for _, g := range got {
			found = found || strings.HasPrefix(g, w)
		}
		if !found {
			t.Errorf("missing %q in:\n%s", w, strings.Join(got, "\n"))
		}
	}
}
