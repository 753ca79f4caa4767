package ads

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/core/push"
	"github.com/baremesh/baremesh/core/testkit"
	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/xdstype"
)

// hookLog records what the connection hooks saw.
type hookLog struct {
	mu           sync.Mutex
	connects     []string // proxy IDs
	peers        []net.Addr
	identities   []*model.Identity
	disconnects  []string
	reports      []Report
	reportProxys []string
}

func (h *hookLog) snapshot() hookLog {
	h.mu.Lock()
	defer h.mu.Unlock()
	return hookLog{connects: append([]string(nil), h.connects...), peers: append([]net.Addr(nil), h.peers...),
		identities: append([]*model.Identity(nil), h.identities...), disconnects: append([]string(nil), h.disconnects...),
		reports: append([]Report(nil), h.reports...), reportProxys: append([]string(nil), h.reportProxys...)}
}

// hookEnv serves LDS from a stand-in with hooks that authenticate every
// caller as ns/sa, refuse the pod "refused" (PermissionDenied) and
// record everything else.
func hookEnv(t *testing.T) (*hookLog, discovery.AggregatedDiscoveryServiceClient) {
	h := &hookLog{}
	snaps := &fixedSnaps{}
	snaps.pc.Store(&push.PushContext{Version: 1})
	srv := New(snaps, Options{NoCache: true, Types: typesWith(map[*xdstype.Type]gen.Generator{xdstype.Listener: func(in gen.Input) ([]gen.Resource, error) {
		return []gen.Resource{{Name: "l", Resource: &listenerv3.Listener{Name: "l"}}}, nil
	}}), Hooks: Hooks{
		Authenticate: func(ctx context.Context) (*model.Identity, error) {
			return &model.Identity{TrustDomain: "cluster.local", Namespace: "ns", ServiceAccount: "sa", Method: "test"}, nil
		},
		OnConnect: func(_ context.Context, p *model.Proxy, peer net.Addr, id *model.Identity) error {
			if p.Identity != id {
				return errors.New("proxy identity is not the authenticated one")
			}
			if p.ID == "sidecar~10.0.0.9~refused.ns~ns.svc.cluster.local" || p.ID == "refused" {
				return status.Error(codes.PermissionDenied, "not in this mesh")
			}
			h.mu.Lock()
			defer h.mu.Unlock()
			h.connects, h.peers, h.identities = append(h.connects, p.ID), append(h.peers, peer), append(h.identities, id)
			return nil
		},
		OnDisconnect: func(p *model.Proxy, _ error) {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.disconnects = append(h.disconnects, p.ID)
		},
		OnReport: func(p *model.Proxy, r Report) {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.reports, h.reportProxys = append(h.reports, r), append(h.reportProxys, p.ID)
		},
	}})
	return h, serveForTest(t, srv)
}

// A connect hook refuses a stream: the client sees its status code, and
// neither a connection nor a disconnection is recorded.
func TestConnectHookRefuses(t *testing.T) {
	h, client := hookEnv(t)
	for _, delta := range []bool{false, true} {
		ctx, cancel := context.WithCancel(context.Background())
		var err error
		if delta {
			st, _ := client.DeltaAggregatedResources(ctx)
			_ = st.Send(&discovery.DeltaDiscoveryRequest{Node: &corev3.Node{Id: "sidecar~10.0.0.9~refused.ns~ns.svc.cluster.local"}, TypeUrl: xdstype.Listener.URL})
			_, err = st.Recv()
		} else {
			st, _ := client.StreamAggregatedResources(ctx)
			_ = st.Send(&discovery.DiscoveryRequest{Node: &corev3.Node{Id: "sidecar~10.0.0.9~refused.ns~ns.svc.cluster.local"}, TypeUrl: xdstype.Listener.URL})
			_, err = st.Recv()
		}
		cancel()
		if status.Code(err) != codes.PermissionDenied || status.Convert(err).Message() != "not in this mesh" {
			t.Fatalf("delta=%v: refused stream ended with %v, want PermissionDenied \"not in this mesh\"", delta, err)
		}
	}
	if got := h.snapshot(); len(got.connects)+len(got.disconnects) != 0 {
		t.Fatalf("hooks saw connects %v and disconnects %v of refused streams", got.connects, got.disconnects)
	}
}

// Istio's health reports (type istio.io/health, healthy and with an
// error) reach the report hook, get no response and no NACK, and the
// stream goes on serving; connect and disconnect hooks see the proxy with
// its peer address and authenticated identity.
func TestReportHookReceivesHealth(t *testing.T) {
	h, client := hookEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	st, err := client.StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rx := pump(st.Recv)
	id := "sidecar~10.0.0.1~vm.ns~ns.svc.cluster.local"
	send := func(r *discovery.DiscoveryRequest) {
		t.Helper()
		if err := st.Send(r); err != nil {
			t.Fatal(err)
		}
	}
	send(&discovery.DiscoveryRequest{Node: &corev3.Node{Id: id}, TypeUrl: "istio.io/health"})
	send(&discovery.DiscoveryRequest{TypeUrl: "istio.io/health", ErrorDetail: &statuspb.Status{Code: int32(codes.Internal), Message: "probe failed: connection refused"}})
	send(&discovery.DiscoveryRequest{TypeUrl: xdstype.Listener.URL})
	// The first response is the LDS one: the reports got none.
	if r := within(t, rx); r.TypeUrl != xdstype.Listener.URL {
		t.Fatalf("first response is of type %q, want only LDS answered", r.TypeUrl)
	}
	testkit.Eventually(t, "two health reports", func() bool { return len(h.snapshot().reports) == 2 })
	got := h.snapshot()
	if got.reports[0].TypeURL != "istio.io/health" || got.reports[0].ErrorDetail != nil {
		t.Errorf("first report %+v, want a healthy istio.io/health", got.reports[0])
	}
	if got.reports[1].ErrorDetail.GetMessage() != "probe failed: connection refused" {
		t.Errorf("second report %+v, want the probe failure", got.reports[1])
	}
	if got.reportProxys[0] != id || len(got.connects) != 1 || got.connects[0] != id {
		t.Errorf("reports from %v, connects %v; want %s", got.reportProxys, got.connects, id)
	}
	if got.peers[0] == nil || got.identities[0].SPIFFEID() != "spiffe://cluster.local/ns/ns/sa/sa" {
		t.Errorf("connect hook saw peer %v identity %+v", got.peers[0], got.identities[0])
	}
	cancel()
	testkit.Eventually(t, "disconnect hook", func() bool { d := h.snapshot().disconnects; return len(d) == 1 && d[0] == id })
}

// The authenticator runs at stream start: a caller it rejects is refused
// with its status before any request is read, and the connect hook never
// sees it; a caller it accepts connects with the identity it returned.
func TestAuthenticatorRefusesAndIdentifies(t *testing.T) {
	var connected atomic.Int64
	var seen atomic.Pointer[model.Identity]
	snaps := &fixedSnaps{}
	snaps.pc.Store(&push.PushContext{Version: 1})
	srv := New(snaps, Options{NoCache: true, Types: typesWith(map[*xdstype.Type]gen.Generator{xdstype.Listener: func(gen.Input) ([]gen.Resource, error) {
		return nil, nil
	}}), Hooks: Hooks{
		Authenticate: func(ctx context.Context) (*model.Identity, error) {
			md, _ := metadata.FromIncomingContext(ctx)
			if len(md.Get("authorization")) == 0 {
				return nil, status.Error(codes.Unauthenticated, "no bearer token")
			}
			return &model.Identity{TrustDomain: "td", Namespace: "vm", ServiceAccount: md.Get("authorization")[0], Method: "token"}, nil
		},
		OnConnect: func(_ context.Context, p *model.Proxy, _ net.Addr, _ *model.Identity) error {
			connected.Add(1)
			seen.Store(p.Identity)
			return nil
		},
	}})
	client := serveForTest(t, srv)
	open := func(ctx context.Context) error {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		st, err := client.StreamAggregatedResources(ctx)
		if err != nil {
			return err
		}
		// Authentication runs before the request is read, so the refusal
		// can come first: Send then returns io.EOF and Recv the status
		// (the test failed with EOF under a CPU hog).
		if err := st.Send(&discovery.DiscoveryRequest{Node: &corev3.Node{Id: "sidecar~10.0.0.1~p.vm~vm.svc.cluster.local"}, TypeUrl: xdstype.Listener.URL}); err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		_, err = st.Recv()
		return err
	}
	if err := open(context.Background()); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("stream without a token ended with %v, want Unauthenticated", err)
	}
	if n := connected.Load(); n != 0 {
		t.Fatalf("connect hook saw %d unauthenticated streams", n)
	}
	if err := open(metadata.AppendToOutgoingContext(context.Background(), "authorization", "app")); err != nil {
		t.Fatalf("authenticated stream: %v", err)
	}
	if id := seen.Load(); id == nil || id.SPIFFEID() != "spiffe://td/ns/vm/sa/app" {
		t.Fatalf("connect hook saw identity %+v, want spiffe://td/ns/vm/sa/app", id)
	}
	// syncz shows it while the stream is open.
	ctx, cancel := context.WithCancel(metadata.AppendToOutgoingContext(context.Background(), "authorization", "app"))
	defer cancel()
	st, err := client.StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&discovery.DiscoveryRequest{Node: &corev3.Node{Id: "sidecar~10.0.0.1~p.vm~vm.svc.cluster.local"}, TypeUrl: xdstype.Listener.URL}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "identity on syncz", func() bool {
		s := srv.Syncz()
		return len(s) == 1 && s[0].Identity == "spiffe://td/ns/vm/sa/app"
	})
}
