package parity

import (
	"context"
	"encoding/json"
	"testing"
	"time"
)

func tree(t *testing.T, s string) Tree {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestDiffPaths: list elements keyed by name and filter_chain_match, leaf
// paths, resources one side lacks.
func TestDiffPaths(t *testing.T) {
	a := map[string]map[string]Tree{LDS: {
		"virtualInbound": tree(t, `{"name":"virtualInbound","filter_chains":[
			{"name":"fc1","filters":[{"name":"hcm","typed_config":{"stat_prefix":"a"}}]},
			{"name":"fc2","filters":[]}]}`),
		"only-istiod": tree(t, `{"name":"only-istiod"}`),
	}}
	b := map[string]map[string]Tree{LDS: {
		"virtualInbound": tree(t, `{"name":"virtualInbound","filter_chains":[
			{"name":"fc2","filters":[]},
			{"name":"fc1","filters":[{"name":"hcm","typed_config":{"stat_prefix":"b"}}]}]}`),
	}, CDS: {"c": tree(t, `{"name":"c","filter_chains":[{"filter_chain_match":{"destination_port":80},"filters":[{"name":"f"}]}]}`)}}
	diffs, compared, equal := DiffResources(a, b)
	want := []string{
		`cds/c: istiod <absent>, ours {"filter_chains":[{"filter_chain_match":{"destination_port":80},"filters":[{"name":"f"}]}],"name":"c"}`,
		`lds/only-istiod: istiod {"name":"only-istiod"}, ours <absent>`,
		`lds/virtualInbound/filter_chains[name=fc1].filters[name=hcm].typed_config.stat_prefix: istiod "a", ours "b"`,
	}
	if len(diffs) != len(want) || compared != 3 || equal != 0 {
		t.Fatalf("diffs %v, compared %d, equal %d", diffs, compared, equal)
	}
	for i, d := range diffs {
		if d.String() != want[i] {
			t.Errorf("diff %d = %s\nwant %s", i, d, want[i])
		}
	}
	keys := listKeys(tree(t, `[{"filter_chain_match":{"destination_port":80},"filters":[{"name":"f"}]},{"filters":[{"name":"f"}]}]`).([]any))
	if len(keys) != 2 || keys[0] != `match={"destination_port":80}` || keys[1] != "match={}" {
		t.Errorf("filter chain keys = %v", keys)
	}
}

func TestCatalogClassify(t *testing.T) {
	c, err := LoadCatalog("catalog.yaml")
	if err != nil {
		t.Fatal(err)
	}
	d := Difference{Path: "cds/outbound|443||kubernetes.default.svc.cluster.local", Istiod: "{}", Ours: Absent}
	if class, e := c.Classify("bench/http", "sidecar", d); class != Deliberate || e.ID != "environment-kubernetes-service" {
		t.Errorf("kubernetes service: %v %v", class, e)
	}
	if class, _ := c.Classify("bench/http", "sidecar", Difference{Path: "cds/outbound|80||x"}); class != Unexplained {
		t.Errorf("unlisted difference classified as %v", class)
	}
}

// TestSelfParity runs the client, normalization and comparison against
// baremeshd on both sides (no istiod needed): every proxy of the vm-mesh
// example must come out equal, with all four types present for a sidecar.
func TestSelfParity(t *testing.T) {
	proxies, err := LoadProxies("testdata/proxies.yaml")
	must(t, err)
	s := &Scenario{Name: "self", Files: []string{"../../examples/vm-mesh/conf.d/reviews.yaml", "../../examples/vm-mesh/conf.d/ratings.yaml"}}
	docs, err := s.Load("testdata/base.yaml", "", false)
	must(t, err)
	config, err := YAML(docs)
	must(t, err)
	addr, stop := startBaremesh(t, config, "", "")
	defer stop()
	var norm Normalizer
	for _, name := range append(DefaultProxies, "reviews-vm") {
		p := proxies[name]
		if p.ScenarioTargets > 0 {
			p = p.withListeners(GRPCTargets(docs, p.ScenarioTargets))
		}
		opts := CollectOptions{Quiet: 300 * time.Millisecond, Timeout: 20 * time.Second}
		a, err := Collect(context.Background(), addr, p, opts)
		must(t, err)
		b, err := Collect(context.Background(), addr, p, opts)
		must(t, err)
		ta, err := trees(&norm, a)
		must(t, err)
		tb, err := trees(&norm, b)
		must(t, err)
		diffs, compared, equal := DiffResources(ta, tb)
		if len(diffs) > 0 || compared != equal || compared == 0 {
			t.Errorf("%s: compared %d, equal %d, diffs %v", name, compared, equal, diffs)
		}
		if name == "reviews-vm" {
			for _, typ := range Types {
				if len(a[typ]) == 0 {
					t.Errorf("%s: no %s resources (got %v)", name, typ, typeCounts(a))
				}
			}
		}
		t.Logf("%s: %v", name, typeCounts(a))
	}
}

// TestUnwrapSingles: a one-element RBAC and/or set compares equal to its
// element; sets of two stay.
func TestUnwrapSingles(t *testing.T) {
	wrapped := map[string]any{"principals": []any{map[string]any{"and_ids": map[string]any{"ids": []any{
		map[string]any{"or_ids": map[string]any{"ids": []any{map[string]any{"authenticated": "x"}}}},
	}}}}}
	got := unwrapSingles(wrapped).(map[string]any)["principals"].([]any)[0].(map[string]any)
	if got["authenticated"] != "x" || len(got) != 1 {
		t.Fatalf("unwrapped: %v", got)
	}
	two := map[string]any{"or_rules": map[string]any{"rules": []any{map[string]any{"any": true}, map[string]any{"any": false}}}}
	if _, ok := unwrapSingles(two).(map[string]any)["or_rules"]; !ok {
		t.Fatalf("a two-element set was unwrapped: %v", two)
	}
}
