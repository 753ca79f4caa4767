package ads

import (
	"context"
	"sync"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/baremesh/baremesh/core/push"
	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/xdstype"
)

// mismatches collects what the cache assertion reports.
type mismatches struct {
	mu   sync.Mutex
	seen []string
}

func (m *mismatches) add(s string) {
	m.mu.Lock()
	m.seen = append(m.seen, s)
	m.mu.Unlock()
}

func (m *mismatches) list() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.seen...)
}

// cachedServer serves the snapshot pc with the generators of types (the
// rest as configured by typesWith), the cache assertion on or off, and
// returns a client of it and what the assertion reported.
func cachedServer(t *testing.T, pc *push.PushContext, assert bool, types map[*xdstype.Type]gen.Generator) (discovery.AggregatedDiscoveryServiceClient, *mismatches) {
	t.Helper()
	snaps := &fixedSnaps{}
	snaps.pc.Store(pc)
	m := &mismatches{}
	srv := New(snaps, Options{CacheAssert: assert, OnCacheMismatch: m.add, Types: typesWith(types)})
	return serveForTest(t, srv), m
}

// ask opens a stream, sends one request and returns the first response.
func ask(t *testing.T, client discovery.AggregatedDiscoveryServiceClient, node *corev3.Node, typeURL string, names ...string) *discovery.DiscoveryResponse {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := client.StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&discovery.DiscoveryRequest{Node: node, TypeUrl: typeURL, ResourceNames: names}); err != nil {
		t.Fatal(err)
	}
	r, err := st.Recv()
	if err != nil {
		t.Fatal(err)
	}
	return r
}
