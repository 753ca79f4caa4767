package scope_test

import (
	"testing"

	"github.com/baremesh/baremesh/xdsserver/gen/gentest"
	"github.com/baremesh/baremesh/xdsserver/gen/scope"
)

// TestPeerAuthnOldestWins: of two policies at one level the oldest
// applies, whatever their names; of one age, the first by name (istiod's
// ComposePeerAuthentication over configs sorted by creation time, then
// name). A policy with a selector in the root namespace applies to no
// workload, even one in the root namespace.
func TestPeerAuthnOldestWins(t *testing.T) {
	pc := gentest.MustBuild(t, `apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: b-strict, namespace: default, creationTimestamp: "2026-01-01T00:00:01Z"}
spec: {mtls: {mode: STRICT}}
---
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: a-disable, namespace: default, creationTimestamp: "2026-01-01T00:00:02Z"}
spec: {mtls: {mode: DISABLE}}
---
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: z-strict, namespace: same-age, creationTimestamp: "2026-01-01T00:00:01Z"}
spec: {mtls: {mode: STRICT}}
---
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: y-disable, namespace: same-age, creationTimestamp: "2026-01-01T00:00:01Z"}
spec: {mtls: {mode: DISABLE}}
---
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: w-new, namespace: workloads, creationTimestamp: "2026-01-01T00:00:02Z"}
spec: {selector: {matchLabels: {app: a}}, mtls: {mode: DISABLE}}
---
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: x-old, namespace: workloads, creationTimestamp: "2026-01-01T00:00:01Z"}
spec: {selector: {matchLabels: {app: a}}, mtls: {mode: STRICT}}
---
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: root-selector, namespace: istio-system}
spec: {selector: {matchLabels: {app: a}}, mtls: {mode: STRICT}}
`)
	for _, c := range []struct {
		ns     string
		labels map[string]string
		want   scope.MTLSMode
	}{
		{"default", nil, scope.MTLSStrict},                             // b-strict is older than a-disable
		{"same-age", nil, scope.MTLSDisable},                           // one age: y-disable by name
		{"workloads", map[string]string{"app": "a"}, scope.MTLSStrict}, // x-old
		{"istio-system", map[string]string{"app": "a"}, scope.MTLSPermissive},
	} {
		if got := scope.PeerAuthnFor(pc, c.ns, c.labels).Mode; got != c.want {
			t.Errorf("namespace %s, labels %v: %v, want %v", c.ns, c.labels, got, c.want)
		}
	}
}
