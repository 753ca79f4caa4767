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

// TestSidecarOldestWins: of two Sidecars that could apply, istiod takes
// the oldest (its sidecar index is sorted by creation time), whatever
// their names; one with a matching selector first.
func TestSidecarOldestWins(t *testing.T) {
	pc := gentest.MustBuild(t, `apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: b-old, namespace: default, creationTimestamp: "2026-01-01T00:00:01Z"}
spec: {egress: [{hosts: ["./old.example.com"]}]}
---
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: a-new, namespace: default, creationTimestamp: "2026-01-01T00:00:02Z"}
spec: {egress: [{hosts: ["./new.example.com"]}]}
---
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: d-old-selector, namespace: default, creationTimestamp: "2026-01-01T00:00:03Z"}
spec: {workloadSelector: {labels: {app: a}}, egress: [{hosts: ["./old-selector.example.com"]}]}
---
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: c-new-selector, namespace: default, creationTimestamp: "2026-01-01T00:00:04Z"}
spec: {workloadSelector: {labels: {app: a}}, egress: [{hosts: ["./new-selector.example.com"]}]}
`)
	host := func(app string) string {
		p := gentest.ProxySpec{ID: "sidecar~10.0.0.9~x.default~default.svc.cluster.local", Labels: map[string]string{"app": app}}.Proxy(t)
		return scope.SidecarFor(pc, p).GetEgress()[0].GetHosts()[0]
	}
	if got := host("b"); got != "./old.example.com" {
		t.Errorf("no selector matching: %s, want b-old's", got)
	}
	if got := host("a"); got != "./old-selector.example.com" {
		t.Errorf("selector matching: %s, want d-old-selector's", got)
	}
}

// TestSidecarDefaults: a Sidecar without egress imports every service
// its namespace sees (istiod's default egress "*/*"), and its
// outboundTrafficPolicy overrides the mesh's.
func TestSidecarDefaults(t *testing.T) {
	pc := gentest.MustBuild(t, `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: ratings, namespace: other}
spec:
  hosts: [ratings.other.svc.cluster.local]
  ports: [{number: 9080, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.0.1.1}]
---
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: registry-only, namespace: default}
spec:
  outboundTrafficPolicy: {mode: REGISTRY_ONLY}
`)
	p := gentest.ProxySpec{ID: "sidecar~10.0.0.9~x.default~default.svc.cluster.local"}.Proxy(t)
	v := scope.New(pc, p)
	if len(v.Services) != 1 {
		t.Errorf("services %v, want ratings (no egress: all the namespace sees)", v.Services)
	}
	if !v.RegistryOnly() {
		t.Error("the Sidecar's REGISTRY_ONLY not applied")
	}
	other := scope.New(pc, gentest.ProxySpec{ID: "sidecar~10.0.0.8~y.elsewhere~elsewhere.svc.cluster.local"}.Proxy(t))
	if other.RegistryOnly() {
		t.Error("another namespace's proxy got REGISTRY_ONLY")
	}
}
