package ads

import (
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/core/push"
	"github.com/baremesh/baremesh/core/testkit"
	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/wire"
	"github.com/baremesh/baremesh/xdsserver/xdstype"
)

// These tests drive the ADS protocol state machine with a raw stream, so
// each step (request, ACK, NACK, stale nonce) is explicit. The generator
// here is a stand-in that returns one listener per requested name, with a
// port the test controls: the real generators and real gRPC xDS clients
// are tested in the gen packages and in realclient_test.go.

// typesWith returns the types of gens, each generating with its stand-in.
func typesWith(gens map[*xdstype.Type]gen.Generator) []*xdstype.Type {
	var out []*xdstype.Type
	for t, g := range gens {
		out = append(out, t.With(g))
	}
	return out
}

type fixedSnaps struct {
	pc atomic.Pointer[push.PushContext]
}

func (f *fixedSnaps) Current() *push.PushContext { return f.pc.Load() }

type env struct {
	srv   *Server
	snaps *fixedSnaps
	port  atomic.Uint32
	// all is what a wildcard subscription gets.
	all  atomic.Pointer[[]string]
	gens atomic.Int64
	// asked is the names of the last generation (nil: wildcard).
	asked  atomic.Pointer[[]string]
	client discovery.AggregatedDiscoveryServiceClient
}

func newEnv(t *testing.T) *env {
	e := &env{snaps: &fixedSnaps{}}
	e.snaps.pc.Store(&push.PushContext{Version: 1})
	e.port.Store(8080)
	// The stand-in generator reads e.port, an input outside any cache key,
	// so these protocol tests run without the caches (cache_test.go tests
	// them).
	e.srv = New(e.snaps, Options{NoCache: true, Types: typesWith(map[*xdstype.Type]gen.Generator{xdstype.Listener: func(in gen.Input) ([]gen.Resource, error) {
		e.gens.Add(1)
		e.asked.Store(&in.Names)
		var out []gen.Resource
		names := in.Names
		if names == nil && e.all.Load() != nil {
			names = *e.all.Load()
		}
		for _, n := range names {
			out = append(out, gen.Resource{Name: n, Resource: &listenerv3.Listener{Name: n, Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{Address: "0.0.0.0", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: e.port.Load()}}}}}})
		}
		return out, nil
	}})})
	e.client = serveForTest(t, e.srv)
	return e
}

// serveOnLoopback serves srv on a loopback port, as the daemon's gRPC
// server does (wire.GRPCServerOptions), until the test ends, and returns
// the address.
func serveOnLoopback(t *testing.T, srv *Server) string {
	t.Helper()
	g := grpc.NewServer(wire.GRPCServerOptions()...)
	srv.Register(g)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)
	return lis.Addr().String()
}

// serveForTest serves srv on a loopback port for the test and returns an
// ADS client connected to it.
func serveForTest(t *testing.T, srv *Server) discovery.AggregatedDiscoveryServiceClient {
	t.Helper()
	cc, err := grpc.NewClient(serveOnLoopback(t, srv), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return discovery.NewAggregatedDiscoveryServiceClient(cc)
}

type stream struct {
	t  *testing.T
	st grpc.BidiStreamingClient[discovery.DiscoveryRequest, discovery.DiscoveryResponse]
	rx chan *discovery.DiscoveryResponse
}

func (e *env) open(t *testing.T) *stream {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	st, err := e.client.StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return &stream{t: t, st: st, rx: pump(st.Recv)}
}

// pump reads a client stream into a channel, closed when the stream ends.
func pump[R any](recv func() (R, error)) chan R {
	rx := make(chan R, 100)
	go func() {
		for {
			r, err := recv()
			if err != nil {
				close(rx)
				return
			}
			rx <- r
		}
	}()
	return rx
}

// within returns the next message of rx, failing the test if the stream
// closes or nothing arrives within 10 s.
func within[R any](t *testing.T, rx chan R) R {
	t.Helper()
	select {
	case r, ok := <-rx:
		if !ok {
			t.Fatal("stream closed")
		}
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("no response within 10s")
	}
	var zero R
	return zero
}

var node = &corev3.Node{Id: "sidecar~10.0.0.1~a.ns~ns.svc.cluster.local"}

func (s *stream) send(version, nonce string, names []string, nackMsg string) {
	s.t.Helper()
	r := &discovery.DiscoveryRequest{Node: node, TypeUrl: xdstype.Listener.URL, VersionInfo: version, ResponseNonce: nonce, ResourceNames: names}
	if nackMsg != "" {
		r.ErrorDetail = &statuspb.Status{Code: 3, Message: nackMsg}
	}
	if err := s.st.Send(r); err != nil {
		s.t.Fatal(err)
	}
}

func (s *stream) recv() *discovery.DiscoveryResponse {
	s.t.Helper()
	return within(s.t, s.rx)
}

// quiet asserts nothing arrives; it is bounded by a later, observable
// event: the caller then triggers something that must arrive, and
// checks the next response is that one.
func (s *stream) next() *discovery.DiscoveryResponse { s.t.Helper(); return s.recv() }

func TestAckNackAndNoResend(t *testing.T) {
	e := newEnv(t)
	s := e.open(t)
	s.send("", "", []string{"a"}, "")
	r1 := s.recv()
	if len(r1.Resources) != 1 || r1.Nonce == "" {
		t.Fatalf("initial response = %v", r1)
	}
	// ACK: nothing is sent back.
	s.send(r1.VersionInfo, r1.Nonce, []string{"a"}, "")
	// NACK of a new version: the server records it and does not resend.
	e.port.Store(9090)
	e.srv.OnPush(nil, &push.Request{Full: true})
	r2 := s.recv()
	s.send(r1.VersionInfo, r2.Nonce, []string{"a"}, "bad port")
	testkit.Eventually(t, "NACK on syncz", func() bool {
		st := e.srv.Syncz()
		return len(st) == 1 && st[0].Types[0].LastNack != nil && st[0].Types[0].LastNack.Message == "bad port"
	})
	// Pushes that do not change the rejected config send nothing.
	before := e.gens.Load()
	for i := 0; i < 20; i++ {
		e.srv.OnPush(nil, &push.Request{Full: true})
	}
	testkit.Eventually(t, "pushes generated", func() bool { return e.gens.Load() > before })
	// A stale request (old nonce) is ignored as well.
	s.send(r1.VersionInfo, r1.Nonce, []string{"a", "b"}, "")
	// The config changes: now it is sent, and it must be the next message.
	e.port.Store(7070)
	e.srv.OnPush(nil, &push.Request{Full: true})
	r3 := s.next()
	if r3.Nonce == r2.Nonce || len(r3.Resources) != 1 {
		t.Fatalf("after NACK the next response should be the changed config, got %v", r3)
	}
	// An ACK that changes the subscription gets an answer with the new set.
	s.send(r3.VersionInfo, r3.Nonce, []string{"a", "b"}, "")
	r4 := s.next()
	if len(r4.Resources) != 2 {
		t.Fatalf("subscription change: %d resources, want 2", len(r4.Resources))
	}
	st := e.srv.Syncz()[0].Types[0]
	if st.LastNack != nil || st.SentNonce != r4.Nonce {
		t.Fatalf("syncz after recovery = %+v", st)
	}
}

func TestNoOpPushSendsNothing(t *testing.T) {
	e := newEnv(t)
	s := e.open(t)
	s.send("", "", []string{"a"}, "")
	r1 := s.recv()
	s.send(r1.VersionInfo, r1.Nonce, []string{"a"}, "")
	for i := 0; i < 10; i++ {
		e.srv.OnPush(nil, &push.Request{Full: true})
	}
	e.port.Store(1)
	e.srv.OnPush(nil, &push.Request{Full: true})
	r2 := s.next()
	if got := r2.Resources[0]; got == nil || r2.Nonce != "2" {
		t.Fatalf("the first message after no-op pushes should be the real change (nonce 2), got nonce %s", r2.Nonce)
	}
}

func TestBadNodeIsRefused(t *testing.T) {
	e := newEnv(t)
	s := e.open(t)
	if err := s.st.Send(&discovery.DiscoveryRequest{Node: &corev3.Node{Id: "bogus~1.2.3.4~a.b~c"}, TypeUrl: xdstype.Listener.URL}); err != nil {
		t.Fatal(err)
	}
	if _, ok := <-s.rx; ok {
		t.Fatal("server answered a node with an unknown proxy type")
	}
	_, err := s.st.Recv()
	if err == nil || !strings.Contains(err.Error(), "unknown proxy type") {
		t.Fatalf("err = %v, want it to name the bad proxy type", err)
	}
}

// An endpoint-only push regenerates no LDS, unless it touched the
// proxy's own address (its inbound config may change).
func TestEndpointPushSkipsLDSUnlessOwnAddress(t *testing.T) {
	e := newEnv(t)
	s := e.open(t)
	s.send("", "", []string{"a"}, "")
	r1 := s.recv()
	s.send(r1.VersionInfo, r1.Nonce, []string{"a"}, "")
	before := e.gens.Load()
	svc := map[model.ServiceKey]bool{{Hostname: "x.mesh", Namespace: "ns"}: true}
	e.srv.OnPush(nil, &push.Request{Endpoints: svc, Addresses: map[string]bool{"10.9.9.9": true}})
	e.srv.OnPush(nil, &push.Request{Endpoints: svc, Addresses: map[string]bool{"10.0.0.1": true}})
	testkit.Eventually(t, "LDS regenerated for the proxy's own address", func() bool { return e.gens.Load() > before })
	e.srv.OnPush(nil, &push.Request{Full: true}) // a barrier: one more generation
	testkit.Eventually(t, "full push generated", func() bool { return e.gens.Load() >= before+2 })
	if got := e.gens.Load() - before; got != 2 {
		t.Fatalf("LDS generated %d times for (other address, own address, full); want 2", got)
	}
}
