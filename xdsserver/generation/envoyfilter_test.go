package generation

import (
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"

	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/xdsserver/gen/gentest"
	"github.com/baremesh/baremesh/xdsserver/wire"
	"github.com/baremesh/baremesh/xdsserver/xdstype"
)

// efWorld: one service, an EnvoyFilter that patches its cluster only for
// proxies whose node metadata says TIER=gold, and one whose patch makes
// an invalid cluster.
const efWorld = `
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: svc, namespace: default}
spec:
  hosts: [svc.example.com]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.2}]
---
apiVersion: networking.istio.io/v1alpha3
kind: EnvoyFilter
metadata: {name: gold, namespace: istio-system}
spec:
  configPatches:
  - applyTo: CLUSTER
    match: {proxy: {metadata: {TIER: gold}}, cluster: {service: svc.example.com}}
    patch: {operation: MERGE, value: {connect_timeout: 7s}}
---
apiVersion: networking.istio.io/v1alpha3
kind: EnvoyFilter
metadata: {name: broken, namespace: istio-system}
spec:
  configPatches:
  - applyTo: CLUSTER
    match: {cluster: {service: svc.example.com}}
    patch: {operation: MERGE, value: {connect_timeout: -1s}}
`

func clusterOf(t *testing.T, res []*wire.Resource, name string) *clusterv3.Cluster {
	t.Helper()
	r := wire.Find(res, name)
	if r == nil {
		t.Fatalf("no cluster %s", name)
	}
	a, err := r.Any()
	if err != nil {
		t.Fatal(err)
	}
	c := &clusterv3.Cluster{}
	if err := a.UnmarshalTo(c); err != nil {
		t.Fatal(err)
	}
	return c
}

// The shape cache keys the node metadata an EnvoyFilter match reads:
// two sidecars that differ only there get different clusters, and the
// cache assertion (regenerate every hit for the real proxy) holds.
func TestEnvoyFilterMetadataInShapeKey(t *testing.T) {
	var mismatch []string
	b := New(Options{CacheAssert: true, OnCacheMismatch: func(m string) { mismatch = append(mismatch, m) }})
	pc, err := gentest.Build([]byte(efWorld))
	if err != nil {
		t.Fatal(err)
	}
	const name = "outbound|80||svc.example.com"
	timeout := func(id, tier string) float64 {
		p := &model.Proxy{ID: id, Type: model.SidecarProxy, Namespace: "default", Labels: map[string]string{}, IstioVersion: "1.31.0",
			Metadata: map[string]string{"TIER": tier, "OTHER": id}}
		res, _, err := b.Build(pc, xdstype.Cluster, p, nil, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		return clusterOf(t, res, name).GetConnectTimeout().AsDuration().Seconds()
	}
	if got := timeout("gold-1", "gold"); got != 7 {
		t.Errorf("gold: connect timeout %vs, want 7s", got)
	}
	if got := timeout("silver-1", "silver"); got == 7 {
		t.Error("silver got the gold patch (the cached output of another key)")
	}
	if got := timeout("gold-2", "gold"); got != 7 {
		t.Errorf("second gold: connect timeout %vs, want 7s", got)
	}
	if len(mismatch) > 0 {
		t.Errorf("cache assertion: %v", mismatch)
	}
	// Keys differ only by metadata an EnvoyFilter reads: OTHER is not.
	b.shapes.mu.Lock()
	n := len(b.shapes.m)
	b.shapes.mu.Unlock()
	if n != 2 {
		t.Errorf("%d shape entries, want 2 (gold, silver)", n)
	}
	// The broken patch: named, and the cluster sent without it.
	ps := b.EnvoyFilterProblems()
	if len(ps) != 1 || ps[0].Resource != "EnvoyFilter/istio-system/broken" || !strings.Contains(ps[0].Error, "configPatches[0] on "+name) {
		t.Errorf("problems %+v", ps)
	}
}
