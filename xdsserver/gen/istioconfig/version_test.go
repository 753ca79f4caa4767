package istioconfig_test

import (
	"strings"
	"testing"
	"time"

	mcpapi "istio.io/api/mcp/v1alpha1"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/config/configtest"
	"github.com/baremesh/baremesh/xdsserver/gen/istioconfig"
)

// TestResourceVersionAndCreateTime: each MCP resource carries a version
// that moves exactly when its content (spec, labels, annotations) does
// and a create_time from the config's CreationTime, as istiod's own MCP
// server sends them; istiod rewrites every resource with an empty
// version on every response and orders conflicting rules by creation
// time. Before, both were empty for file configs.
func TestResourceVersionAndCreateTime(t *testing.T) {
	const we = `apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: vm, namespace: ns, labels: {a: "1", b: "2", c: "3"}, annotations: {note: hello}}
spec: {address: 10.0.0.1, labels: {app: vm, version: v1, zone: z1, tier: web}, ports: {http: 8080, grpc: 9090, tcp: 7070}}
`
	base := configtest.Typed(t, we)
	created := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	base.CreationTime = created
	res := func(c config.Config) *mcpapi.Metadata {
		t.Helper()
		r, err := istioconfig.Resource(&c)
		if err != nil {
			t.Fatal(err)
		}
		return r.GetMetadata()
	}
	md := res(base)
	if md.GetVersion() == "" {
		t.Fatal("empty version")
	}
	if !md.GetCreateTime().AsTime().Equal(created) {
		t.Fatalf("create_time %v, want %v", md.GetCreateTime().AsTime(), created)
	}
	// The same content: the same version, every time (map fields are
	// encoded in key order), whatever the source's resource version.
	for i := range 20 {
		c := configtest.Typed(t, we)
		c.ResourceVersion = "rv" + string(rune('a'+i))
		c.Source = config.Source{Name: "other", File: "f.yaml", Line: i}
		if v := res(c).GetVersion(); v != md.GetVersion() {
			t.Fatalf("same content, version %s then %s", md.GetVersion(), v)
		}
	}
	for name, edit := range map[string]string{
		"spec":       replace(we, "10.0.0.1", "10.0.0.2"),
		"label":      replace(we, `c: "3"`, `c: "4"`),
		"annotation": replace(we, "{note: hello}", "{note: bye}"),
		"moved":      replace(we, `{a: "1", b: "2", c: "3"}, annotations: {note: hello}`, `{a: "1", b: "2"}, annotations: {note: hello, c: "3"}`),
	} {
		if v := res(configtest.Typed(t, edit)).GetVersion(); v == md.GetVersion() {
			t.Errorf("%s changed, version %s did not", name, v)
		}
	}
	if ct := res(configtest.Typed(t, we)).GetCreateTime(); ct != nil {
		t.Errorf("unknown creation time sent as %v", ct)
	}
}

func replace(s, old, nu string) string { return strings.ReplaceAll(s, old, nu) }
