package load

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/anypb"
)

// scripted is an ADS server whose streams the test drives by hand.
type scripted struct {
	discovery.UnimplementedAggregatedDiscoveryServiceServer
	sotw  chan discovery.AggregatedDiscoveryService_StreamAggregatedResourcesServer
	delta chan discovery.AggregatedDiscoveryService_DeltaAggregatedResourcesServer
}

func (s *scripted) StreamAggregatedResources(st discovery.AggregatedDiscoveryService_StreamAggregatedResourcesServer) error {
	s.sotw <- st
	<-st.Context().Done()
	return nil
}

func (s *scripted) DeltaAggregatedResources(st discovery.AggregatedDiscoveryService_DeltaAggregatedResourcesServer) error {
	s.delta <- st
	<-st.Context().Done()
	return nil
}

// startScripted serves a scripted server and starts one proxy of mode
// against it.
func startScripted(t *testing.T, mode Mode) (*scripted, *Fleet) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &scripted{sotw: make(chan discovery.AggregatedDiscoveryService_StreamAggregatedResourcesServer, 1),
		delta: make(chan discovery.AggregatedDiscoveryService_DeltaAggregatedResourcesServer, 1)}
	g := grpc.NewServer()
	discovery.RegisterAggregatedDiscoveryServiceServer(g, s)
	go func() { _ = g.Serve(lis) }()
	f, err := Start(context.Background(), Options{Addr: lis.Addr().String(), Proxies: 1, Mode: mode})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Stop(); g.Stop() })
	return s, f
}

func anyOf(t *testing.T, c *clusterv3.Cluster) *anypb.Any {
	a, err := anypb.New(c)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func waitFor(t *testing.T, f *Fleet, what string, p Predicate) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.Expect(p).Wait(ctx); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// TestNackSotW: a response with a bad resource is NACKed with the
// previous version, the response's nonce and the problem; a good one
// is ACKed and applied.
func TestNackSotW(t *testing.T) {
	s, f := startScripted(t, SotW)
	st := <-s.sotw
	recv := func() *discovery.DiscoveryRequest { t.Helper(); return nextCDS(t, st.Recv) }
	if r := recv(); r.GetNode().GetId() == "" || r.GetResponseNonce() != "" {
		t.Fatalf("first request %v", r)
	}
	x := anyOf(t, &clusterv3.Cluster{Name: "x"})
	for _, c := range []struct {
		nonce string
		res   []*anypb.Any
		err   string
	}{
		{"a", []*anypb.Any{x, x}, "duplicate resource name"},
		{"b", []*anypb.Any{{TypeUrl: Listener.URL(), Value: x.GetValue()}}, `resource of type "` + Listener.URL() + `" in a cds response`},
		{"c", []*anypb.Any{{TypeUrl: Cluster.URL(), Value: []byte{0x0a, 0x05}}}, "cluster: "},
		{"d", []*anypb.Any{{TypeUrl: Cluster.URL()}}, "cds resource without a name"},
	} {
		if err := st.Send(&discovery.DiscoveryResponse{VersionInfo: "v-" + c.nonce, TypeUrl: Cluster.URL(), Nonce: c.nonce, Resources: c.res}); err != nil {
			t.Fatal(err)
		}
		r := recv()
		if r.GetResponseNonce() != c.nonce || r.GetVersionInfo() != "" || !strings.Contains(r.GetErrorDetail().GetMessage(), c.err) {
			t.Fatalf("nonce %s: got %v, want a NACK with %q", c.nonce, r, c.err)
		}
	}
	if err := st.Send(&discovery.DiscoveryResponse{VersionInfo: "v-e", TypeUrl: Cluster.URL(), Nonce: "e", Resources: []*anypb.Any{x}}); err != nil {
		t.Fatal(err)
	}
	if r := recv(); r.GetResponseNonce() != "e" || r.GetVersionInfo() != "v-e" || r.GetErrorDetail() != nil {
		t.Fatalf("got %v, want an ACK of v-e", r)
	}
	waitFor(t, f, "cluster x", func(v View) bool { return v.Cluster("x") != nil })
	if n := f.Totals().Nacks; n != 4 {
		t.Errorf("%d NACKs, want 4", n)
	}
}

// TestNackDelta: Delta NACKs name the nonce and the problem; removals
// and heartbeats are applied.
func TestNackDelta(t *testing.T) {
	s, f := startScripted(t, Delta)
	st := <-s.delta
	recv := func() *discovery.DeltaDiscoveryRequest { t.Helper(); return nextCDS(t, st.Recv) }
	if r := recv(); len(r.GetResourceNamesSubscribe()) != 1 || r.GetResourceNamesSubscribe()[0] != "*" {
		t.Fatalf("first request %v", r)
	}
	x := anyOf(t, &clusterv3.Cluster{Name: "x"})
	send := func(nonce string, res []*discovery.Resource, removed ...string) {
		t.Helper()
		if err := st.Send(&discovery.DeltaDiscoveryResponse{TypeUrl: Cluster.URL(), Nonce: nonce, Resources: res, RemovedResources: removed}); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		nonce string
		res   []*discovery.Resource
		err   string
	}{
		{"a", []*discovery.Resource{{Resource: x}}, "delta resource without a name"},
		{"b", []*discovery.Resource{{Name: "y", Resource: x}}, `resource named "y" holds "x"`},
		{"c", []*discovery.Resource{{Name: "x", Resource: x}, {Name: "x", Resource: x}}, "duplicate resource name"},
	} {
		send(c.nonce, c.res)
		if r := recv(); r.GetResponseNonce() != c.nonce || !strings.Contains(r.GetErrorDetail().GetMessage(), c.err) {
			t.Fatalf("nonce %s: got %v, want a NACK with %q", c.nonce, r, c.err)
		}
	}
	ack := func(nonce string) {
		t.Helper()
		if r := recv(); r.GetResponseNonce() != nonce || r.GetErrorDetail() != nil {
			t.Fatalf("got %v, want an ACK of %s", r, nonce)
		}
	}
	send("d", []*discovery.Resource{{Name: "x", Version: "1", Resource: x}, {Name: "z", Version: "1", Resource: anyOf(t, &clusterv3.Cluster{Name: "z"})}})
	ack("d")
	waitFor(t, f, "clusters x and z", func(v View) bool { return v.Set(Cluster).Len() == 2 })
	send("e", []*discovery.Resource{{Name: "x"}}) // a heartbeat: x stays
	ack("e")
	send("f", nil, "z")
	ack("f")
	waitFor(t, f, "z removed", func(v View) bool { return v.Cluster("x") != nil && v.Cluster("z") == nil && v.Set(Cluster).Len() == 1 })
	if got := f.View(0).Set(Cluster).versions()["x"]; got != "1" {
		t.Errorf("version of x %q, want 1", got)
	}
}

// nextCDS returns the next request for clusters, skipping other types.
func nextCDS[R interface{ GetTypeUrl() string }](t *testing.T, recv func() (R, error)) R {
	t.Helper()
	for {
		r, err := recv()
		if err != nil {
			t.Fatal(err)
		}
		if r.GetTypeUrl() == Cluster.URL() {
			return r
		}
	}
}
