package ads

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/baremesh/baremesh/core/push"
	"github.com/baremesh/baremesh/core/testkit"
	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/xdstype"
)

// gatedGen is a listener generator that, once closed, makes every
// generation wait at the gate, and records how many waited at once.
type gatedGen struct {
	closed       atomic.Bool
	gate         chan struct{}
	mu           sync.Mutex
	now, maxSeen int
	gens         atomic.Uint32
}

func (g *gatedGen) generate(gen.Input) ([]gen.Resource, error) {
	n := g.gens.Add(1)
	if g.closed.Load() {
		g.mu.Lock()
		g.now++
		g.maxSeen = max(g.maxSeen, g.now)
		g.mu.Unlock()
		<-g.gate
		g.mu.Lock()
		g.now--
		g.mu.Unlock()
	}
	name := fmt.Sprintf("listener-%d", n) // each generation differs, so each push sends
	return []gen.Resource{{Name: name, Resource: &listenerv3.Listener{Name: name, Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{Address: "0.0.0.0", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 80}}}}}}}, nil
}

func (g *gatedGen) waiting() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.now
}

// TestPushWakesConnectionsAFewAtATime (issue #30): a push wakes at most
// maxTurns connections to work it out at once, not every connection:
// with generation itself unbounded and every generation held at a gate,
// the connections inside generation stop at maxTurns, and the rest are
// served once those go on to their sends. (Before, a push woke all 40.)
func TestPushWakesConnectionsAFewAtATime(t *testing.T) {
	const conns = 40
	turns := maxTurns()
	if conns < 2*turns {
		t.Skipf("%d turns on this machine: the test needs fewer than %d", turns, conns/2)
	}
	g := &gatedGen{gate: make(chan struct{})}
	reg := prometheus.NewRegistry()
	snaps := &fixedSnaps{}
	snaps.pc.Store(&push.PushContext{Version: 1})
	srv := New(snaps, Options{Registerer: reg, NoCache: true, MaxConcurrentGeneration: 1000,
		Types: typesWith(map[*xdstype.Type]gen.Generator{xdstype.Listener: g.generate})})
	addr := serveOnLoopback(t, srv)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := stalledClient(t, addr) // its window is ample for these responses
	var got atomic.Int64
	for i := range conns {
		st := openLDS(t, ctx, client, i)
		go func() {
			for {
				if _, err := st.Recv(); err != nil {
					return
				}
				got.Add(1)
			}
		}()
	}
	testkit.EventuallyWithin(t, 30*time.Second, "every proxy has its first response", func() bool { return got.Load() == conns })

	g.closed.Store(true)
	srv.OnPush(nil, &push.Request{Full: true})
	testkit.EventuallyWithin(t, 30*time.Second, "connections reach generation", func() bool { return g.waiting() >= turns })
	// Connections past the turns would be in generation by now if they
	// had been woken; give them a moment to show up (this is a window in
	// which nothing may happen, not a wait for a condition).
	time.Sleep(200 * time.Millisecond)
	if n := g.waiting(); n != turns {
		t.Fatalf("%d connections generating at once, want the %d turns", n, turns)
	}
	close(g.gate)
	testkit.EventuallyWithin(t, 30*time.Second, "every proxy has the push", func() bool { return got.Load() == 2*conns })
	g.mu.Lock()
	maxSeen := g.maxSeen
	g.mu.Unlock()
	if maxSeen != turns {
		t.Fatalf("at most %d connections generated at once, want %d", maxSeen, turns)
	}
	// A response is counted after its write returns, which may be after
	// the proxy has read it: wait for the count, then check it is exact.
	lds := srv.metrics.pushes.WithLabelValues("lds")
	testkit.EventuallyWithin(t, 30*time.Second, "every response counted", func() bool { return testutil.ToFloat64(lds) >= 2*conns })
	if n := testutil.ToFloat64(lds); n != 2*conns {
		t.Fatalf("%v LDS responses counted, want %d", n, 2*conns)
	}
}

// TestStalledProxiesHoldNoTurn: connections whose sends wait on proxies
// that do not read are woken for the next push without a turn, so as
// many stalled proxies as there are turns do not keep a reading proxy
// from its push (no send timeout here: they stay stalled). Before the
// rule, the waker gave turns to stalled connections, which kept them.
func TestStalledProxiesHoldNoTurn(t *testing.T) {
	reg := prometheus.NewRegistry()
	srv, addr := flowEnv(t, Options{Registerer: reg, SlowSend: time.Hour, SendTimeout: -1})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	turns := maxTurns()
	stalled := 2 * turns // more than the turns, whatever order the waker takes them in
	for i := range stalled {
		openLDS(t, ctx, stalledClient(t, addr), i) // never read
	}
	testkit.EventuallyWithin(t, 30*time.Second, "the stalled proxies are sending", func() bool {
		n := 0
		for _, c := range srv.connsSorted() {
			if c.sending.Load() {
				n++
			}
		}
		return n == stalled
	})
	reader := openLDS(t, ctx, stalledClient(t, addr), stalled)
	rx := pump(reader.Recv)
	within(t, rx) // its first response
	srv.OnPush(nil, &push.Request{Full: true})
	if r := within(t, rx); len(r.GetResources()) != flowListeners {
		t.Fatalf("the reading proxy got %d listeners", len(r.GetResources()))
	}
	if n := len(srv.fanout.turns); n != 0 {
		t.Errorf("%d turns held after the push, want 0", n)
	}
}
