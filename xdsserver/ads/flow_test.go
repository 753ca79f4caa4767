package ads

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/baremesh/baremesh/core/push"
	"github.com/baremesh/baremesh/core/testkit"
	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/xdstype"
)

// flowListeners is how many listeners flowEnv's generator returns: 40 of
// 10 KB make ~400 KB (far past a 64 KB flow-control window). What the flow
// tests need is bytes, not resources: 4,000 listeners of 100 bytes made
// the same size, but each generation, marshal and unmarshal then took
// seconds under -race on a busy machine, and TestSendTimeoutEndsAStalledStream
// and TestStreamCaps failed waiting for them (5 of 5 runs with a CPU hog).
const flowListeners = 40

// flowEnv is a server whose listener generator returns ~400 KB, with the
// flow options given, and the address it serves on.
func flowEnv(t *testing.T, opts Options) (*Server, string) {
	t.Helper()
	snaps := &fixedSnaps{}
	snaps.pc.Store(&push.PushContext{Version: 1})
	opts.NoCache = true
	var gens atomic.Uint32 // each generation differs, so each push sends
	pad := strings.Repeat("x", 10<<10)
	opts.Types = typesWith(map[*xdstype.Type]gen.Generator{xdstype.Listener: func(gen.Input) ([]gen.Resource, error) {
		g := gens.Add(1)
		out := make([]gen.Resource, flowListeners)
		for i := range out {
			n := fmt.Sprintf("listener-%05d-%s", i, pad)
			out[i] = gen.Resource{Name: n, Resource: &listenerv3.Listener{Name: n, Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{Address: "0.0.0.0", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(1000+i) + g}}}}}}
		}
		return out, nil
	}})
	srv := New(snaps, opts)
	return srv, serveOnLoopback(t, srv)
}

// stalledClient dials addr with a fixed 64 KB window (no BDP growth), so
// a stream it does not read stalls the server's sends, as a proxy that
// stops reading.
func stalledClient(t *testing.T, addr string) discovery.AggregatedDiscoveryServiceClient {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return discovery.NewAggregatedDiscoveryServiceClient(cc)
}

func openLDS(t *testing.T, ctx context.Context, c discovery.AggregatedDiscoveryServiceClient, i int) grpc.BidiStreamingClient[discovery.DiscoveryRequest, discovery.DiscoveryResponse] {
	t.Helper()
	st, err := c.StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n := &corev3.Node{Id: fmt.Sprintf("sidecar~10.0.%d.%d~p%d.ns~ns.svc.cluster.local", i>>8, i&255, i)}
	if err := st.Send(&discovery.DiscoveryRequest{Node: n, TypeUrl: xdstype.Listener.URL}); err != nil {
		t.Fatal(err)
	}
	return st
}

// TestSendTimeoutEndsAStalledStream: a proxy that stops reading is cut
// after the send timeout with reason send_timeout, and a proxy that
// reads, on the same server with one send slot, is served meanwhile.
func TestSendTimeoutEndsAStalledStream(t *testing.T) {
	reg := prometheus.NewRegistry()
	srv, addr := flowEnv(t, Options{Registerer: reg, MaxConcurrentSends: 1, SlowSend: 50 * time.Millisecond, SendTimeout: 600 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stalled := openLDS(t, ctx, stalledClient(t, addr), 1)
	testkit.EventuallyWithin(t, 10*time.Second, "the stalled proxy connects", func() bool { return srv.Connected() == 1 })
	// The first response fits gRPC's queue; the second waits for it.
	srv.OnPush(nil, &push.Request{Full: true})
	srv.OnPush(nil, &push.Request{Full: true})

	reader := openLDS(t, ctx, stalledClient(t, addr), 2)
	rx := pump(reader.Recv)
	if r := within(t, rx); len(r.GetResources()) != flowListeners {
		t.Fatalf("reading proxy got %d listeners", len(r.GetResources()))
	}
	testkit.EventuallyWithin(t, 10*time.Second, "the stalled stream is cut", func() bool {
		return testutil.ToFloat64(srv.metrics.streamEnds.WithLabelValues(endSendTimeout)) == 1
	})
	if n := testutil.ToFloat64(srv.metrics.sendTimeouts); n != 1 {
		t.Errorf("send timeouts = %v, want 1", n)
	}
	// The stalled client sees its stream end with the reason.
	for {
		_, err := stalled.Recv()
		if err != nil {
			if status.Code(err) != codes.DeadlineExceeded {
				t.Errorf("stalled stream ended with %v, want DeadlineExceeded", err)
			}
			break
		}
	}
}

// TestStreamCaps: streams past maxStreamsPerConnection or
// maxStreamsPerPeer are refused with ResourceExhausted and counted;
// closing one makes room again.
func TestStreamCaps(t *testing.T) {
	reg := prometheus.NewRegistry()
	srv, addr := flowEnv(t, Options{Registerer: reg, MaxStreamsPerConnection: 2, MaxStreamsPerPeer: 3})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c1 := stalledClient(t, addr)
	first, firstCancel := context.WithCancel(ctx)
	openLDS(t, first, c1, 1)
	openLDS(t, ctx, c1, 2)
	testkit.EventuallyWithin(t, 10*time.Second, "two streams", func() bool { return srv.Connected() == 2 })
	refusedWith := func(st grpc.BidiStreamingClient[discovery.DiscoveryRequest, discovery.DiscoveryResponse]) codes.Code {
		for {
			if _, err := st.Recv(); err != nil {
				return status.Code(err)
			}
		}
	}
	if code := refusedWith(openLDS(t, ctx, c1, 3)); code != codes.ResourceExhausted {
		t.Errorf("third stream on one connection: %v, want ResourceExhausted", code)
	}
	c2 := stalledClient(t, addr)
	openLDS(t, ctx, c2, 4)
	testkit.EventuallyWithin(t, 10*time.Second, "a third stream from a second connection", func() bool { return srv.Connected() == 3 })
	if code := refusedWith(openLDS(t, ctx, c2, 5)); code != codes.ResourceExhausted {
		t.Errorf("fourth stream from one peer: %v, want ResourceExhausted", code)
	}
	if a, b := testutil.ToFloat64(srv.metrics.refused.WithLabelValues("per_connection")), testutil.ToFloat64(srv.metrics.refused.WithLabelValues("per_peer")); a != 1 || b != 1 {
		t.Errorf("refused per_connection %v per_peer %v, want 1 and 1", a, b)
	}
	firstCancel()
	testkit.EventuallyWithin(t, 10*time.Second, "the first stream ends", func() bool { return srv.Connected() == 2 })
	openLDS(t, ctx, c1, 6)
	testkit.EventuallyWithin(t, 10*time.Second, "room again after a stream ends", func() bool { return srv.Connected() == 3 })
}

// TestFirstRequestTimeout: a stream that sends no request is ended with
// DeadlineExceeded once the first-request timeout passes, and counted;
// one that sends its request in time is served.
func TestFirstRequestTimeout(t *testing.T) {
	reg := prometheus.NewRegistry()
	srv, addr := flowEnv(t, Options{Registerer: reg, FirstRequestTimeout: 200 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := stalledClient(t, addr)
	// Cancelled (not a deadline, which the client would report as
	// DeadlineExceeded too) if the server never ends it.
	sctx, scancel := context.WithCancel(ctx)
	defer time.AfterFunc(10*time.Second, scancel).Stop()
	silent, err := c.StreamAggregatedResources(sctx)
	if err != nil {
		t.Fatal(err)
	}
	served := openLDS(t, ctx, c, 1)
	if _, err := served.Recv(); err != nil {
		t.Fatalf("a stream that sent its request: %v", err)
	}
	if _, err := silent.Recv(); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("a stream without a request ended with %v, want DeadlineExceeded", err)
	}
	if n := testutil.ToFloat64(srv.metrics.refused.WithLabelValues("first_request")); n != 1 {
		t.Errorf("refused first_request = %v, want 1", n)
	}
	if n := srv.Connected(); n != 1 {
		t.Errorf("%d streams connected, want the one that sent a request", n)
	}
}
