package xdsserver

import (
	"slices"
	"sync"
	"testing"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/baremesh/baremesh/core/push"
	"github.com/baremesh/baremesh/xdsserver/gen"
)

// A changed SotW EDS subscription is answered with the clusters the proxy
// lacks, and only those are generated: an ACK that adds one cluster to
// thousands must not regenerate the thousands. A cluster unsubscribed and
// subscribed again is sent again (the client forgot it), and dropping
// names alone sends nothing.
func TestEDSSubscriptionChangeSendsOnlyNewNames(t *testing.T) {
	snaps := &fixedSnaps{}
	snaps.pc.Store(&push.PushContext{Version: 1})
	var mu sync.Mutex
	var generated []string
	srv := New(snaps, Options{NoCache: true, Generators: map[string]gen.Generator{gen.EndpointType: func(in gen.Input) ([]gen.Resource, error) {
		mu.Lock()
		generated = append(generated, in.Names...)
		mu.Unlock()
		var out []gen.Resource
		for _, n := range in.Names {
			out = append(out, gen.Resource{Name: n, Resource: &endpointv3.ClusterLoadAssignment{ClusterName: n}})
		}
		return out, nil
	}}})
	client := serveForTest(t, srv)
	e := &env{client: client}
	s := e.open(t)
	send := func(r *discovery.DiscoveryResponse, names ...string) {
		t.Helper()
		req := &discovery.DiscoveryRequest{Node: node, TypeUrl: gen.EndpointType, ResourceNames: names}
		if r != nil {
			req.VersionInfo, req.ResponseNonce = r.VersionInfo, r.Nonce
		}
		if err := s.st.Send(req); err != nil {
			t.Fatal(err)
		}
	}
	names := func(r *discovery.DiscoveryResponse) []string {
		var out []string
		for _, a := range r.Resources {
			var cla endpointv3.ClusterLoadAssignment
			if err := a.UnmarshalTo(&cla); err != nil {
				t.Fatal(err)
			}
			out = append(out, cla.ClusterName)
		}
		return out
	}
	took := func() []string {
		mu.Lock()
		defer mu.Unlock()
		out := generated
		generated = nil
		slices.Sort(out)
		return out
	}

	send(nil, "c", "a", "b") // unsorted, as Envoy may send them
	r1 := s.recv()
	if got := names(r1); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("initial response = %v", got)
	}
	took()
	send(r1, "d", "a", "c", "b") // ACK adding d
	r2 := s.recv()
	if got := names(r2); !slices.Equal(got, []string{"d"}) {
		t.Fatalf("after subscribing d: response %v, want [d]", got)
	}
	if got := took(); !slices.Equal(got, []string{"d"}) {
		t.Fatalf("after subscribing d: generated %v, want [d]", got)
	}
	send(r2, "d", "c") // ACK dropping a and b: nothing to send
	send(r2, "a", "c", "d") // a again: the client forgot it
	r3 := s.next()
	if got := names(r3); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("after subscribing a again: next response %v, want [a]", got)
	}
	if got := took(); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("after subscribing a again: generated %v, want [a]", got)
	}
	send(r3, "a", "c", "d") // ACK
	// A full push regenerates the whole subscription.
	srv.OnPush(nil, &push.Request{Full: true})
	pollFor(t, "full push generated", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(generated) == 3
	})
	if got := took(); !slices.Equal(got, []string{"a", "c", "d"}) {
		t.Fatalf("full push generated %v", got)
	}
}
