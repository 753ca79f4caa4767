package generation

import (
	"fmt"
	"strings"
	"testing"

	"github.com/baremesh/baremesh/xdsserver/gen/gentest"
)

// The label keys configs select proxies by: every selector kind, a
// VirtualService's sourceLabels and a failover priority's label names,
// but not a ServiceEntry's workloadSelector nor a WorkloadEntry's own
// labels (they choose what a proxy serves).
func TestLabelKeysRead(t *testing.T) {
	pc, err := gentest.Build([]byte(`apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: s, namespace: ns}
spec: {workloadSelector: {labels: {sidecar: x}}, egress: [{hosts: ["./*"]}]}
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: d, namespace: ns}
spec:
  host: a.example
  workloadSelector: {matchLabels: {dr: x}}
  subsets: [{name: one, labels: {subset: one}}]
  trafficPolicy:
    loadBalancer:
      localityLbSetting: {enabled: true, failoverPriority: [failover, "topology.example/rack=r1"]}
    outlierDetection: {consecutive5xxErrors: 1}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: v, namespace: ns}
spec:
  hosts: [a.example]
  http: [{match: [{sourceLabels: {source: x}}], route: [{destination: {host: a.example}}]}]
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: a, namespace: ns}
spec: {selector: {matchLabels: {authz: x}}}
---
apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: t, namespace: ns}
spec: {selector: {matchLabels: {telemetry: x}}, accessLogging: [{providers: [{name: envoy}]}]}
---
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: g, namespace: ns}
spec: {selector: {istio: ingressgateway}, servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: ["*"]}]}
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: se, namespace: ns}
spec: {hosts: [a.example], ports: [{number: 80, name: http, protocol: HTTP}], workloadSelector: {labels: {app: x}}}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: we, namespace: ns}
spec: {address: 10.0.0.1, labels: {app: x, version: v1}}
`))
	if err != nil {
		t.Fatal(err)
	}
	keys, _ := labelKeysRead(pc, nil)
	for _, k := range []string{"sidecar", "dr", "failover", "topology.example/rack", "source", "authz", "telemetry", "istio", "service.istio.io/canonical-name"} {
		if !keys[k] {
			t.Errorf("%s: not among the keys read %v", k, keys)
		}
	}
	for _, k := range []string{"app", "version", "subset"} {
		if keys[k] {
			t.Errorf("%s: read, but only a ServiceEntry, a WorkloadEntry or a subset names it", k)
		}
	}
}

// BenchmarkLabelKeysRead: once per snapshot, over 5,000 VirtualServices
// and 5,000 DestinationRules: the first time, and for a later snapshot
// whose specs are unchanged.
func BenchmarkLabelKeysRead(b *testing.B) {
	var conf strings.Builder
	for i := range 5000 {
		fmt.Fprintf(&conf, `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: v%d, namespace: ns}
spec:
  hosts: [h%d.example]
  http: [{match: [{uri: {prefix: /a}}, {sourceLabels: {team: a}}], route: [{destination: {host: h%d.example, subset: v1}, weight: 90}, {destination: {host: h%d.example, subset: v2}, weight: 10}], retries: {attempts: 3}}]
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: d%d, namespace: ns}
spec:
  host: h%d.example
  trafficPolicy: {connectionPool: {tcp: {maxConnections: 10}}, outlierDetection: {consecutive5xxErrors: 3}}
  subsets: [{name: v1, labels: {version: v1}}, {name: v2, labels: {version: v2}}]
---
`, i, i, i, i, i, i)
	}
	pc, err := gentest.Build([]byte(conf.String()))
	if err != nil {
		b.Fatal(err)
	}
	_, bySpec := labelKeysRead(pc, nil)
	b.Run("first", func(b *testing.B) {
		for b.Loop() {
			labelKeysRead(pc, nil)
		}
	})
	b.Run("next snapshot", func(b *testing.B) { // the specs unchanged
		for b.Loop() {
			labelKeysRead(pc, bySpec)
		}
	})
}
