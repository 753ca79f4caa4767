package telemetry_test

import (
	"strings"
	"testing"

	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/xdsserver/gen/gentest"
	"github.com/baremesh/baremesh/xdsserver/gen/telemetry"
)

const levels = `
apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: mesh, namespace: istio-system}
spec:
  tracing: [{providers: [{name: nope}], randomSamplingPercentage: 5}]
  accessLogging: [{providers: [{name: envoy}]}]
  metrics: [{providers: [{name: prometheus}]}]
---
apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: ns, namespace: shop}
spec:
  tracing: [{randomSamplingPercentage: 50, customTags: {a: {literal: {value: x}}}}]
---
apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: ns-second, namespace: shop}
spec:
  accessLogging: [{disabled: true}]
---
apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: web, namespace: shop}
spec:
  selector: {matchLabels: {app: web}}
  accessLogging: [{match: {mode: SERVER}, disabled: true}]
  metrics: [{overrides: [{match: {metric: REQUEST_COUNT}, tagOverrides: {x: {value: "1"}}}]}]
`

// TestPrecedence: mesh, then namespace, then workload, each overriding
// only what it sets; of two at one level the first by name applies.
func TestPrecedence(t *testing.T) {
	pc := gentest.MustBuild(t, levels)
	web := &model.Proxy{Namespace: "shop", Labels: map[string]string{"app": "web"}}
	other := &model.Proxy{Namespace: "shop", Labels: map[string]string{"app": "db"}}

	server := telemetry.For(pc, web, telemetry.ServerSide)
	if server.Tracing == nil || *server.Tracing.Sampling != 50 || server.Tracing.CustomTags["a"] == nil {
		t.Errorf("tracing: want the namespace's sampling 50 and tag a, got %+v", server.Tracing)
	}
	if !server.Tracing.Disabled {
		t.Errorf("tracing: the mesh's provider %q is not in the mesh config: want it off", "nope")
	}
	if server.Logging == nil || len(server.Logging) != 0 {
		t.Errorf("web server side: want access logging off (its workload Telemetry), got %+v", server.Logging)
	}
	client := telemetry.For(pc, web, telemetry.ClientSide)
	if len(client.Logging) != 1 || client.Logging[0].Provider.GetName() != "envoy" {
		t.Errorf("web client side: want the mesh's envoy log, got %+v", client.Logging)
	}
	if len(client.Metrics) != 1 || len(client.Metrics[0].Overrides) != 1 || client.Metrics[0].Overrides[0].Name != "REQUEST_COUNT" {
		t.Errorf("web metrics: want prometheus with the REQUEST_COUNT override, got %+v", client.Metrics)
	}
	if m := telemetry.For(pc, other, telemetry.ClientSide); len(m.Metrics) != 1 || len(m.Metrics[0].Overrides) != 0 || len(m.Logging) != 1 {
		t.Errorf("db: want mesh metrics without overrides and the mesh's log (ns-second is ignored), got %+v / %+v", m.Metrics, m.Logging)
	}
	if got := telemetry.Levels(pc, "shop", web.Labels); len(got) != 3 || len(got[1].GetTracing()) != 1 {
		t.Errorf("levels: want mesh, ns (not ns-second), web; got %d", len(got))
	}
}

// TestProblems: a provider the mesh lacks and a second Telemetry at one
// level are named; nothing else is.
func TestProblems(t *testing.T) {
	pc := gentest.MustBuild(t, levels)
	ps := telemetry.Problems(pc)
	if len(ps) != 2 {
		t.Fatalf("want 2 problems, got %+v", ps)
	}
	var all []string
	for _, p := range ps {
		all = append(all, p.Resource+": "+p.Error)
	}
	joined := strings.Join(all, "\n")
	for _, want := range []string{`Telemetry/istio-system/mesh: spec.tracing[0].providers[0]: provider "nope" is not defined`, "Telemetry/shop/ns-second: two Telemetry resources at one level, namespace shop without selector: Telemetry/shop/ns applies"} {
		if !strings.Contains(joined, want) {
			t.Errorf("problems lack %q:\n%s", want, joined)
		}
	}
}
