package ads

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/baremesh/baremesh/core/push"
	"github.com/baremesh/baremesh/core/testkit"
	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/xdstype"
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
	srv := New(snaps, Options{NoCache: true, Types: typesWith(map[*xdstype.Type]gen.Generator{xdstype.Endpoint: func(in gen.Input) ([]gen.Resource, error) {
		mu.Lock()
		generated = append(generated, in.Names...)
		mu.Unlock()
		var out []gen.Resource
		for _, n := range in.Names {
			out = append(out, gen.Resource{Name: n, Resource: &endpointv3.ClusterLoadAssignment{ClusterName: n}})
		}
		return out, nil
	}})})
	client := serveForTest(t, srv)
	e := &env{client: client}
	s := e.open(t)
	send := func(r *discovery.DiscoveryResponse, names ...string) {
		t.Helper()
		req := &discovery.DiscoveryRequest{Node: node, TypeUrl: xdstype.Endpoint.URL, ResourceNames: names}
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
	send(r2, "d", "c")      // ACK dropping a and b: nothing to send
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
	testkit.Eventually(t, "full push generated", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(generated) == 3
	})
	if got := took(); !slices.Equal(got, []string{"a", "c", "d"}) {
		t.Fatalf("full push generated %v", got)
	}
}

// A NACKed SotW EDS response is rolled back: the rejected version is not
// sent again, a newer one is, and a return to the version the proxy held
// before the NACK sends nothing.
func TestEDSNackRollsBack(t *testing.T) {
	snaps := &fixedSnaps{}
	snaps.pc.Store(&push.PushContext{Version: 1})
	var weight atomic.Uint32 // the content of cluster b
	weight.Store(1)
	var gens atomic.Int64
	srv := New(snaps, Options{NoCache: true, Types: typesWith(map[*xdstype.Type]gen.Generator{xdstype.Endpoint: func(in gen.Input) ([]gen.Resource, error) {
		gens.Add(1)
		var out []gen.Resource
		for _, n := range in.Names {
			cla := &endpointv3.ClusterLoadAssignment{ClusterName: n}
			if n == "b" {
				cla.Policy = &endpointv3.ClusterLoadAssignment_Policy{OverprovisioningFactor: wrapperspb.UInt32(weight.Load())}
			}
			out = append(out, gen.Resource{Name: n, Resource: cla})
		}
		return out, nil
	}})})
	s := (&env{client: serveForTest(t, srv)}).open(t)
	send := func(r *discovery.DiscoveryResponse, nack string) {
		t.Helper()
		req := &discovery.DiscoveryRequest{Node: node, TypeUrl: xdstype.Endpoint.URL, ResourceNames: []string{"a", "b"}}
		if r != nil {
			req.ResponseNonce = r.Nonce
		}
		if nack != "" {
			req.ErrorDetail = &statuspb.Status{Code: 3, Message: nack}
		}
		if err := s.st.Send(req); err != nil {
			t.Fatal(err)
		}
	}
	bWeight := func(r *discovery.DiscoveryResponse) uint32 {
		t.Helper()
		if len(r.Resources) != 1 {
			t.Fatalf("response has %d resources, want only b", len(r.Resources))
		}
		var cla endpointv3.ClusterLoadAssignment
		if err := r.Resources[0].UnmarshalTo(&cla); err != nil || cla.ClusterName != "b" {
			t.Fatalf("response %v (%v), want b", &cla, err)
		}
		return cla.GetPolicy().GetOverprovisioningFactor().GetValue()
	}
	send(nil, "")
	r1 := s.recv()
	send(r1, "")
	weight.Store(2)
	srv.OnPush(nil, &push.Request{Full: true})
	r2 := s.recv()
	if w := bWeight(r2); w != 2 {
		t.Fatalf("pushed b with %d, want 2", w)
	}
	send(r2, "bad b")
	testkit.Eventually(t, "NACK recorded", func() bool { return srv.Syncz()[0].Types[0].LastNack != nil })
	pushed := func(w uint32) {
		weight.Store(w)
		before := gens.Load()
		srv.OnPush(nil, &push.Request{Full: true})
		testkit.Eventually(t, "push generated", func() bool { return gens.Load() > before })
	}
	pushed(2) // rejected: not sent
	pushed(1) // what the proxy holds after the rollback: not sent
	pushed(3) // new
	r3 := s.next()
	if w := bWeight(r3); w != 3 {
		t.Fatalf("after the NACK the next response carries b with %d, want 3", w)
	}
}
