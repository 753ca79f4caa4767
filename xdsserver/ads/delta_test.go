package ads

import (
	"context"
	"fmt"
	"slices"
	"testing"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"

	"github.com/baremesh/baremesh/core/push"
	"github.com/baremesh/baremesh/core/testkit"
	"github.com/baremesh/baremesh/xdsserver/wire"
	"github.com/baremesh/baremesh/xdsserver/xdstype"
)

// Delta protocol tests, step by step against the rules of Envoy's xDS
// protocol documentation (incremental variant). As in server_test.go the
// generator is a stand-in; there is no independent Delta client on these
// machines (every real one here is SotW-only), the load client in
// internal/load is the other Delta peer.

type dstream struct {
	t  *testing.T
	st grpc.BidiStreamingClient[discovery.DeltaDiscoveryRequest, discovery.DeltaDiscoveryResponse]
	rx chan *discovery.DeltaDiscoveryResponse
}

func (e *env) openDelta(t *testing.T) *dstream {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	st, err := e.client.DeltaAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return &dstream{t: t, st: st, rx: pump(st.Recv)}
}

func (s *dstream) send(r *discovery.DeltaDiscoveryRequest) {
	s.t.Helper()
	r.Node, r.TypeUrl = node, xdstype.Listener.URL
	if err := s.st.Send(r); err != nil {
		s.t.Fatal(err)
	}
}

func (s *dstream) recv() *discovery.DeltaDiscoveryResponse {
	s.t.Helper()
	return within(s.t, s.rx)
}

func names(r *discovery.DeltaDiscoveryResponse) []string {
	var out []string
	for _, res := range r.GetResources() {
		out = append(out, res.GetName())
	}
	slices.Sort(out)
	return out
}

func TestDeltaWildcardChangesRemovalsAndNACK(t *testing.T) {
	e := newEnv(t)
	all := []string{"a", "b"}
	e.all.Store(&all)
	s := e.openDelta(t)
	s.send(&discovery.DeltaDiscoveryRequest{})
	r1 := s.recv()
	if got := names(r1); !slices.Equal(got, []string{"a", "b"}) || r1.GetResources()[0].GetVersion() == "" {
		t.Fatalf("initial wildcard response: %v", r1)
	}
	s.send(&discovery.DeltaDiscoveryRequest{ResponseNonce: r1.GetNonce()})

	// A no-op push sends nothing; removing "b" sends only its removal.
	e.srv.OnPush(nil, &push.Request{Full: true})
	only := []string{"a"}
	e.all.Store(&only)
	e.srv.OnPush(nil, &push.Request{Full: true})
	r2 := s.recv()
	if len(r2.GetResources()) != 0 || !slices.Equal(r2.GetRemovedResources(), []string{"b"}) {
		t.Fatalf("removal: resources %v removed %v; want only b removed", names(r2), r2.GetRemovedResources())
	}
	s.send(&discovery.DeltaDiscoveryRequest{ResponseNonce: r2.GetNonce()})

	// A change of "a" is NACKed: not resent on later pushes; a new change
	// is sent.
	e.port.Store(1111)
	e.srv.OnPush(nil, &push.Request{Full: true})
	r3 := s.recv()
	s.send(&discovery.DeltaDiscoveryRequest{ResponseNonce: r3.GetNonce(), ErrorDetail: &statuspb.Status{Code: 3, Message: "no"}})
	testkit.Eventually(t, "delta NACK on syncz", func() bool { st := e.srv.Syncz(); return st[0].Types[0].LastNack != nil })
	for i := 0; i < 5; i++ {
		e.srv.OnPush(nil, &push.Request{Full: true})
	}
	e.port.Store(2222)
	e.srv.OnPush(nil, &push.Request{Full: true})
	r4 := s.recv()
	if r4.GetNonce() != "4" || !slices.Equal(names(r4), []string{"a"}) {
		t.Fatalf("after NACK the next response must be the new change (nonce 4), got nonce %s %v", r4.GetNonce(), names(r4))
	}
}

func TestDeltaNamedSubscriptionsAndInitialVersions(t *testing.T) {
	e := newEnv(t)
	s := e.openDelta(t)
	s.send(&discovery.DeltaDiscoveryRequest{ResourceNamesSubscribe: []string{"x", "y"}})
	r1 := s.recv()
	if !slices.Equal(names(r1), []string{"x", "y"}) {
		t.Fatalf("named: %v", names(r1))
	}
	versions := map[string]string{}
	for _, r := range r1.GetResources() {
		versions[r.GetName()] = r.GetVersion()
	}
	// Subscribing one more name sends only that one.
	s.send(&discovery.DeltaDiscoveryRequest{ResponseNonce: r1.GetNonce(), ResourceNamesSubscribe: []string{"z"}})
	if r2 := s.recv(); !slices.Equal(names(r2), []string{"z"}) {
		t.Fatalf("subscribe z: %v", names(r2))
	}
	if asked := *e.asked.Load(); !slices.Equal(asked, []string{"z"}) {
		t.Fatalf("subscribe z generated %v, want only z", asked)
	}
	// Unsubscribing sends nothing; a change then covers only what is left.
	s.send(&discovery.DeltaDiscoveryRequest{ResourceNamesUnsubscribe: []string{"x"}})
	testkit.Eventually(t, "unsubscribe applied", func() bool { return e.srv.Syncz()[0].Types[0].Names == 2 })
	e.port.Store(3333)
	e.srv.OnPush(nil, &push.Request{Full: true})
	if r3 := s.recv(); !slices.Equal(names(r3), []string{"y", "z"}) {
		t.Fatalf("after unsubscribe x: %v", names(r3))
	}

	// A reconnect that presents what it holds gets only what differs.
	e.port.Store(8080)
	s2 := e.openDelta(t)
	s2.send(&discovery.DeltaDiscoveryRequest{ResourceNamesSubscribe: []string{"x", "y"}, InitialResourceVersions: versions})
	r4 := s2.recv()
	if len(r4.GetResources()) != 0 {
		t.Fatalf("reconnect with current versions got %v, want nothing", names(r4))
	}
}

// A long subscription, which the codec makes one list shared between the
// streams naming the same set, behaves as a short one: each stream gets
// every name, an addition is answered alone, and one stream's
// unsubscription narrows its own pushes, not the other's.
func TestDeltaLongSubscriptionShared(t *testing.T) {
	e := newEnv(t)
	var many []string
	for i := range 2 * wire.SharedFrom {
		many = append(many, fmt.Sprintf("n%03d", i))
	}
	reversed := slices.Clone(many)
	slices.Reverse(reversed)
	s, s2 := e.openDelta(t), e.openDelta(t)
	s.send(&discovery.DeltaDiscoveryRequest{ResourceNamesSubscribe: many})
	r1 := s.recv()
	s2.send(&discovery.DeltaDiscoveryRequest{ResourceNamesSubscribe: append(reversed, many[3])})
	r2 := s2.recv()
	if !slices.Equal(names(r1), many) || !slices.Equal(names(r2), many) {
		t.Fatalf("long subscriptions answered with %d and %d resources, want %d each", len(r1.GetResources()), len(r2.GetResources()), len(many))
	}
	s2.send(&discovery.DeltaDiscoveryRequest{ResponseNonce: r2.GetNonce()})

	s.send(&discovery.DeltaDiscoveryRequest{ResponseNonce: r1.GetNonce(), ResourceNamesSubscribe: []string{"zz"}})
	if r := s.recv(); !slices.Equal(names(r), []string{"zz"}) {
		t.Fatalf("subscribe zz: %v", names(r))
	}
	gens := e.gens.Load()
	s.send(&discovery.DeltaDiscoveryRequest{ResourceNamesUnsubscribe: []string{many[0]}})
	testkit.Eventually(t, "unsubscribe applied", func() bool {
		n := 0
		for _, p := range e.srv.Syncz() {
			n += p.Types[0].Names
		}
		return n == 2*len(many) // (len(many)+1-1) + len(many)
	})
	e.port.Store(3333)
	e.srv.OnPush(nil, &push.Request{Full: true})
	want := append(slices.Clone(many[1:]), "zz")
	got1, got2 := names(s.recv()), names(s2.recv())
	if !slices.Equal(got1, want) || !slices.Equal(got2, many) {
		t.Fatalf("push after one stream unsubscribed %s: %d and %d resources, want %d and %d", many[0], len(got1), len(got2), len(want), len(many))
	}
	// The unsubscription alone generated nothing (it has no answer; it
	// generated the whole subscription and, racing the push, sent part
	// of the new config early).
	if n := e.gens.Load() - gens; n != 2 {
		t.Errorf("%d generations for an unsubscription and a push to two streams, want 2 (the push's)", n)
	}
}
