package mcp_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	networking "istio.io/api/networking/v1alpha3"
	"sigs.k8s.io/yaml"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/store"
	"github.com/baremesh/baremesh/sources/mcp"
	"github.com/baremesh/baremesh/sources/sourcetest"
)

// harness runs an Upstream against a stand-in server; a unit is the set
// of resources one Put gave the server.
type harness struct {
	srv   *standIn
	delta bool
	units map[string][]string // unit → "ns/name"s
	kinds map[string]string   // "ns/name" → type URL
}

func newHarness(t *testing.T, form wireForm, delta bool) *harness {
	return &harness{srv: startStandIn(t, form), delta: delta, units: map[string][]string{}, kinds: map[string]string{}}
}

func (h *harness) config() mcp.UpstreamConfig {
	return mcp.UpstreamConfig{Name: "upstream", Address: "xds://" + h.srv.addr(), Delta: h.delta}
}

func testOptions() mcp.Options {
	return mcp.Options{BackoffMin: 20 * time.Millisecond, BackoffMax: 200 * time.Millisecond, ResponseTimeout: 5 * time.Second, SyncTimeout: 5 * time.Second}
}

func runUpstream(t *testing.T, cfg mcp.UpstreamConfig, opts mcp.Options, sink store.Sink) (*mcp.Upstream, func()) {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	u := mcp.New(cfg, opts, sink)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := u.Run(ctx); err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); wg.Wait() }) }
	t.Cleanup(stop)
	return u, stop
}

func (h *harness) Start(t *testing.T, sink store.Sink) func() {
	_, stop := runUpstream(t, h.config(), testOptions(), sink)
	return stop
}

// parse types manifests with core/config, as a file would be.
func parse(t *testing.T, manifests string) []config.Config {
	t.Helper()
	var out []config.Config
	for _, doc := range strings.Split(manifests, "\n---\n") {
		var raw map[string]any
		if err := yaml.Unmarshal([]byte(doc), &raw); err != nil {
			t.Fatal(err)
		}
		c, err := config.Typed(raw, config.Source{Name: "test"})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
	return out
}

func (h *harness) Put(t *testing.T, unit, manifests string) {
	t.Helper()
	byType := map[string]map[string]proto.Message{}
	var names []string
	for _, c := range parse(t, manifests) {
		u := mcp.TypeURL(c.Key().Kind)
		n := c.Namespace + "/" + c.Name
		if byType[u] == nil {
			byType[u] = map[string]proto.Message{}
		}
		byType[u][n] = c.Spec
		names = append(names, n)
		h.kinds[n] = u
	}
	h.units[unit] = names
	for u, specs := range byType {
		h.srv.put(u, specs)
	}
}

// PutBad gives every resource of unit a spec that fails validation (a
// ServiceEntry without hosts).
func (h *harness) PutBad(t *testing.T, unit string) {
	for _, n := range h.units[unit] {
		h.srv.put(h.kinds[n], map[string]proto.Message{n: &networking.ServiceEntry{}})
	}
}

func (h *harness) Delete(t *testing.T, unit string) {
	for _, n := range h.units[unit] {
		h.srv.remove(h.kinds[n], n)
	}
	delete(h.units, unit)
}

func (h *harness) Coalesces() bool { return false }

func TestConformance(t *testing.T) {
	for _, tc := range []struct {
		name  string
		form  wireForm
		delta bool
	}{
		{"SotWWrapped", wrapped, false},
		{"SotWUnwrapped", unwrapped, false},
		{"DeltaWrapped", wrapped, true},
		{"DeltaUnwrapped", unwrapped, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sourcetest.Run(t, func(t *testing.T) sourcetest.Harness { return newHarness(t, tc.form, tc.delta) })
		})
	}
}
