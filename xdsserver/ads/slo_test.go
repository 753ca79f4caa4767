package ads

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/core/push"
	"github.com/baremesh/baremesh/core/testkit"
	"github.com/baremesh/baremesh/xdsserver/xdstype"
)

// fakeConn is a connection for the tracker's own tests: only the proxy
// and its subscriptions matter to it.
func fakeConn(id string, typ model.NodeType, proxyless bool, subs ...*xdstype.Type) *conn {
	c := &conn{id: id + "-1", proxy: &model.Proxy{ID: id, Type: typ, Proxyless: proxyless}, subs: map[string]*sub{}}
	for _, t := range subs {
		c.subs[t.URL] = &sub{typ: t, typeURL: t.URL}
	}
	return c
}

func TestSLOAccounting(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	type step func(tr *sloTracker, clock *time.Time)
	at := func(d time.Duration) step { return func(_ *sloTracker, clock *time.Time) { *clock = t0.Add(d) } }
	sidecar := fakeConn("s", model.SidecarProxy, false, xdstype.Listener, xdstype.Cluster)
	grpcless := fakeConn("g", model.SidecarProxy, true, xdstype.Listener)
	r1, r2 := &pushRecord{}, &pushRecord{}
	enq := func(c *conn, r *pushRecord) step {
		return func(tr *sloTracker, _ *time.Time) { tr.enqueued(c, r, t0) }
	}
	sent := func(c *conn, r *pushRecord, typ string) step {
		return func(tr *sloTracker, _ *time.Time) { c.curRecs = []*pushRecord{r}; tr.sent(c, typ); c.curRecs = nil }
	}
	handled := func(c *conn, r *pushRecord) step {
		return func(tr *sloTracker, _ *time.Time) { tr.handled(c, []*pushRecord{r}) }
	}
	ack := func(c *conn, typ string, sentAt time.Duration) step {
		return func(tr *sloTracker, _ *time.Time) { tr.acked(c, typ, t0.Add(sentAt)) }
	}
	connect := func(c *conn) step { return func(tr *sloTracker, _ *time.Time) { tr.connected(c) } }
	disconnect := func(c *conn) step { return func(tr *sloTracker, _ *time.Time) { tr.disconnected(c) } }
	for _, tc := range []struct {
		name                        string
		steps                       []step
		id                          string
		converged, missed, pending  int
		last, worst                 string
		missedSidecar, missedGRPCls float64
	}{
		{name: "every type sent must be ACKed", id: "s",
			steps: []step{connect(sidecar), enq(sidecar, r1), sent(sidecar, r1, "lds"), sent(sidecar, r1, "cds"), handled(sidecar, r1),
				at(300 * time.Millisecond), ack(sidecar, "lds", 0)},
			pending: 1},
		{name: "converged on the last ACK, within the objective", id: "s",
			steps: []step{connect(sidecar), enq(sidecar, r1), sent(sidecar, r1, "lds"), sent(sidecar, r1, "cds"), handled(sidecar, r1),
				at(300 * time.Millisecond), ack(sidecar, "lds", 0), at(400 * time.Millisecond), ack(sidecar, "cds", 0)},
			converged: 1, last: "400ms", worst: "400ms"},
		{name: "a push that sent nothing is no change", id: "s",
			steps: []step{connect(sidecar), enq(sidecar, r1), handled(sidecar, r1), ack(sidecar, "lds", 0)}},
		{name: "an ACK of a response sent before the push does not count", id: "s",
			steps:   []step{connect(sidecar), at(time.Second), enq(sidecar, r1), sent(sidecar, r1, "lds"), handled(sidecar, r1), ack(sidecar, "lds", 500*time.Millisecond)},
			pending: 1},
		{name: "slower than the objective: missed, by proxy type", id: "g",
			steps:     []step{connect(grpcless), enq(grpcless, r1), sent(grpcless, r1, "lds"), handled(grpcless, r1), at(3 * time.Second), ack(grpcless, "lds", 0)},
			converged: 1, missed: 1, last: "3s", worst: "3s", missedGRPCls: 1},
		{name: "worst keeps the slowest, last the latest", id: "s",
			steps: []step{connect(sidecar), enq(sidecar, r1), sent(sidecar, r1, "lds"), handled(sidecar, r1), at(2 * time.Second), ack(sidecar, "lds", 0),
				enq(sidecar, r2), sent(sidecar, r2, "lds"), handled(sidecar, r2), at(2500 * time.Millisecond), ack(sidecar, "lds", 2*time.Second)},
			converged: 2, missed: 2, last: "2.5s", worst: "2.5s", missedSidecar: 2},
		{name: "sent, then the stream ended: the next stream's ACK converges it", id: "s",
			steps: []step{connect(sidecar), enq(sidecar, r1), sent(sidecar, r1, "lds"), handled(sidecar, r1), disconnect(sidecar),
				connect(sidecar), at(200 * time.Millisecond), ack(sidecar, "lds", 100*time.Millisecond)},
			converged: 1, last: "200ms", worst: "200ms"},
		{name: "queued, the stream ended before sending: every subscribed type must be ACKed on the next stream", id: "s",
			steps: []step{connect(sidecar), at(10 * time.Millisecond), enq(sidecar, r1), disconnect(sidecar), connect(sidecar),
				at(50 * time.Millisecond), ack(sidecar, "lds", 20*time.Millisecond)},
			pending: 1},
		{name: "queued, the stream ended, the next stream ACKed every type", id: "s",
			steps: []step{connect(sidecar), at(10 * time.Millisecond), enq(sidecar, r1), disconnect(sidecar), connect(sidecar),
				at(50 * time.Millisecond), ack(sidecar, "lds", 20*time.Millisecond), at(60 * time.Millisecond), ack(sidecar, "cds", 30*time.Millisecond)},
			converged: 1, last: "60ms", worst: "60ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := t0
			tr := newSLOTracker(time.Second, nil)
			tr.now = func() time.Time { return clock }
			r1.v, r2.v = PushView{}, PushView{}
			for _, s := range tc.steps {
				s(tr, &clock)
			}
			st := tr.status(tc.id)
			if st == nil {
				t.Fatal("no status")
			}
			if st.Converged != tc.converged || st.Missed != tc.missed || st.Pending != tc.pending || st.Last != tc.last || st.Worst != tc.worst {
				t.Fatalf("status = %+v, want converged %d missed %d pending %d last %q worst %q", st, tc.converged, tc.missed, tc.pending, tc.last, tc.worst)
			}
			if got := counterValue(t, tr.missed.WithLabelValues("sidecar")); got != tc.missedSidecar {
				t.Errorf("missed{sidecar} = %v, want %v", got, tc.missedSidecar)
			}
			if got := counterValue(t, tr.missed.WithLabelValues("proxyless")); got != tc.missedGRPCls {
				t.Errorf("missed{proxyless} = %v, want %v", got, tc.missedGRPCls)
			}
			if tc.converged > 0 && (r1.v.Converged != 1 || r1.v.Slowest[0].ID != tc.id) {
				t.Errorf("push record = %+v, want converged by %s", r1.v, tc.id)
			}
		})
	}
}

// TestSLOReconnectMidPush: a real gRPC stream receives a change and ends
// before ACKing it; the proxy reconnects with the same node ID, and its
// ACK on the new stream completes the change: syncz, pushz and the
// missed-objective metric count it.
func TestSLOReconnectMidPush(t *testing.T) {
	e := newEnv(t)
	e.srv.slo.objective = 100 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	st, err := e.client.StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s1 := &stream{t: t, st: st, rx: pump(st.Recv)}
	s1.send("", "", []string{"a"}, "")
	r1 := s1.recv()
	s1.send(r1.VersionInfo, r1.Nonce, []string{"a"}, "")
	e.port.Store(9191)
	// The change happened 1s ago: slower than the objective whatever
	// the machine's speed.
	e.srv.OnPush(nil, &push.Request{Full: true, Start: time.Now().Add(-time.Second)})
	r2 := s1.recv()
	if r2.Nonce == r1.Nonce {
		t.Fatal("no push")
	}
	cancel() // the proxy goes away without ACKing
	testkit.Eventually(t, "old stream gone", func() bool { return e.srv.Connected() == 0 })
	if c := e.srv.Pushes()[0].Converged; c != 0 {
		t.Fatalf("converged before any ACK: %d", c)
	}

	s2 := e.open(t) // same node ID
	s2.send(r2.VersionInfo, "", []string{"a"}, "")
	r3 := s2.recv()
	s2.send(r3.VersionInfo, r3.Nonce, []string{"a"}, "")
	testkit.Eventually(t, "change converged on the new stream", func() bool {
		sz := e.srv.Syncz()
		return len(sz) == 1 && sz[0].Convergence != nil && sz[0].Convergence.Converged == 1
	})
	cs := e.srv.Syncz()[0].Convergence
	if cs.Missed != 1 || cs.Pending != 0 || cs.Objective != "100ms" {
		t.Fatalf("convergence = %+v", cs)
	}
	if d, err := time.ParseDuration(cs.Worst); err != nil || d < time.Second {
		t.Fatalf("worst = %q (%v), want ≥ 1s", cs.Worst, err)
	}
	pv := e.srv.Pushes()[0]
	if pv.Converged != 1 || len(pv.Slowest) != 1 || pv.Slowest[0].ID != e.srv.Syncz()[0].ID || pv.Slowest[0].Type != "sidecar" {
		t.Fatalf("pushz = %+v", pv)
	}
	if got := counterValue(t, e.srv.slo.missed.WithLabelValues("sidecar")); got != 1 {
		t.Fatalf("missed{sidecar} = %v, want 1", got)
	}
}

// counterValue reads one counter.
func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// TestSLOPendingIsBounded: a proxy that never ACKs (it NACKs everything
// or does not read) keeps at most maxPending changes; the ones dropped
// count as missed. Without the bound the soak's daemon grew by one
// record per push per such proxy (RSS +37% in 30 minutes).
func TestSLOPendingIsBounded(t *testing.T) {
	tr := newSLOTracker(time.Second, nil)
	c := &conn{proxy: &model.Proxy{ID: "sidecar~10.0.0.1~never-acks.ns~ns.svc.cluster.local"}}
	tr.connected(c)
	for range 1000 {
		tr.enqueued(c, &pushRecord{}, time.Now())
	}
	st := tr.status(c.proxy.ID)
	if st.Pending != maxPending || st.Missed != 1000-maxPending {
		t.Errorf("pending %d missed %d, want %d and %d", st.Pending, st.Missed, maxPending, 1000-maxPending)
	}
}
