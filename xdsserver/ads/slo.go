package ads

import (
	"cmp"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/baremesh/baremesh/core/model"
)

// Convergence SLO accounting. A change (one push of the pipeline) is
// converged for a proxy (by node ID, not stream) when, for every xDS type
// the push sent it, the proxy has ACKed a response of that type sent
// after the push was queued for it: the response carrying the push or a
// later one, which is generated from the same or a newer snapshot. The
// ACK may come on a new stream of the same node ID: a proxy that
// reconnects in the middle of a push still converges. A push that never
// reached a stream (queued, then the stream ended) waits for ACKs of
// every type the old stream had subscribed. A push that sent the proxy
// nothing is no change for it and is not counted. Its time is from the
// change (push.Request.Start) to the ACK that completed it.

// maxSlowest is how many of the slowest proxies a push record keeps.
const maxSlowest = 5

// maxPending bounds the changes kept per proxy: a proxy that never
// ACKs (it NACKs everything, or does not read) would otherwise keep one
// per push for as long as it stays connected. Past it the oldest is
// dropped and counted as missed: it did not converge.
const maxPending = 64

// forgetAfter: a proxy with no stream and pending changes is forgotten
// after this long (it is not coming back).
const forgetAfter = 10 * time.Minute

// ConvergenceStatus is one proxy's convergence on /debug/syncz.
type ConvergenceStatus struct {
	// Objective is the configured SLO; zero when none is set.
	Objective string `json:"objective,omitempty"`
	// Last and Worst are change→ACK times of the last converged change
	// and of the slowest one since the proxy first connected.
	Last    string    `json:"last,omitempty"`
	LastAt  time.Time `json:"lastAt,omitzero"`
	Worst   string    `json:"worst,omitempty"`
	WorstAt time.Time `json:"worstAt,omitzero"`
	// Converged counts the changes that converged; Missed, those of them
	// slower than the objective; Pending, the changes not yet ACKed.
	Converged int `json:"converged"`
	Missed    int `json:"missed"`
	Pending   int `json:"pending"`
}

// SlowProxy is one of a push's slowest proxies on /debug/pushz.
type SlowProxy struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Duration string `json:"duration"`
	d        time.Duration
}

// pendingChange is one push not yet converged for one proxy.
type pendingChange struct {
	rec      *pushRecord
	start    time.Time // when the change happened
	queued   time.Time // when it was queued for the proxy
	types    map[string]bool
	handled  bool // a stream handled it (or the stream ended)
	reported bool // reported to rec as converged
}

// proxySLO is one node ID's convergence record.
type proxySLO struct {
	kind           string
	streams        int
	gone           time.Time // when its last stream ended
	pending        []*pendingChange
	last, worst    time.Duration
	lastAt, worstA time.Time
	converged      int
	missed         int
}

// sloTracker keeps every proxy's convergence record.
type sloTracker struct {
	objective time.Duration
	missed    *prometheus.CounterVec
	converged *prometheus.CounterVec

	mu      sync.Mutex
	proxies map[string]*proxySLO
	now     func() time.Time
}

func newSLOTracker(objective time.Duration, reg prometheus.Registerer) *sloTracker {
	t := &sloTracker{objective: objective, proxies: map[string]*proxySLO{}, now: time.Now,
		missed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "baremesh_xds_convergence_slo_missed_total",
			Help: "Changes whose change-to-ACK time exceeded the convergence objective (convergenceSLO), by proxy type (sidecar, router, proxyless)."},
			[]string{"proxy_type"}),
		converged: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "baremesh_xds_converged_changes_total",
			Help: "Changes ACKed by a proxy (its convergence is measured against the objective), by proxy type."},
			[]string{"proxy_type"}),
	}
	if reg != nil {
		reg.MustRegister(t.missed, t.converged)
	}
	for _, k := range []string{string(model.SidecarProxy), string(model.Router), "proxyless"} { // proxyKind's values, at 0 (metrics.go: zero)
		t.missed.WithLabelValues(k)
		t.converged.WithLabelValues(k)
	}
	return t
}

// proxyKind is a connection's proxy type for the SLO metric.
func proxyKind(c *conn) string {
	if c.proxy.Proxyless {
		return "proxyless"
	}
	return string(c.proxy.Type)
}

// entry returns id's record, made if absent; t.mu is held.
func (t *sloTracker) entry(id, kind string) *proxySLO {
	p := t.proxies[id]
	if p == nil {
		p = &proxySLO{kind: kind}
		t.proxies[id] = p
	}
	return p
}

// connected counts a new stream of c's node.
func (t *sloTracker) connected(c *conn) {
	t.mu.Lock()
	t.entry(c.proxy.ID, proxyKind(c)).streams++
	t.mu.Unlock()
}

// disconnected: pushes the stream had not handled wait for ACKs of every
// type it subscribed, on the node's next stream. c.mu must not be held.
func (t *sloTracker) disconnected(c *conn) {
	c.mu.Lock()
	subscribed := make([]string, 0, len(c.subs))
	for _, w := range c.subs {
		subscribed = append(subscribed, w.typ.Short)
	}
	c.mu.Unlock()
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.proxies[c.proxy.ID]
	if p == nil {
		return
	}
	p.streams--
	if p.streams <= 0 {
		p.gone = t.now()
	}
	for _, pc := range p.pending {
		if !pc.handled {
			pc.handled = true
			for _, typ := range subscribed {
				pc.types[typ] = true
			}
		}
	}
	t.prune(p)
	t.forget()
}

// enqueued records that push rec (of a change at start) was queued for c.
func (t *sloTracker) enqueued(c *conn, rec *pushRecord, start time.Time) {
	if start.IsZero() {
		start = t.now()
	}
	t.mu.Lock()
	p := t.entry(c.proxy.ID, proxyKind(c))
	if !slices.ContainsFunc(p.pending, func(pc *pendingChange) bool { return pc.rec == rec }) {
		p.pending = append(p.pending, &pendingChange{rec: rec, start: start, queued: t.now(), types: map[string]bool{}})
	}
	if n := len(p.pending) - maxPending; n > 0 {
		p.missed += n
		if t.objective > 0 {
			t.missed.WithLabelValues(p.kind).Add(float64(n))
		}
		p.pending = slices.Delete(p.pending, 0, n)
	}
	t.mu.Unlock()
}

// sent records that c sent a response of typ carrying the pushes it is
// handling (c.curRecs; called on c's loop goroutine).
func (t *sloTracker) sent(c *conn, typ string) {
	if len(c.curRecs) == 0 {
		return
	}
	t.mu.Lock()
	if p := t.proxies[c.proxy.ID]; p != nil {
		for _, pc := range p.pending {
			if slices.Contains(c.curRecs, pc.rec) {
				pc.types[typ] = true
			}
		}
	}
	t.mu.Unlock()
}

// handled records that c handled recs: a push that sent nothing is no
// change for the proxy and is dropped.
func (t *sloTracker) handled(c *conn, recs []*pushRecord) {
	t.mu.Lock()
	if p := t.proxies[c.proxy.ID]; p != nil {
		for _, pc := range p.pending {
			if slices.Contains(recs, pc.rec) {
				pc.handled = true
			}
		}
		t.prune(p)
	}
	t.mu.Unlock()
}

// acked records that c's proxy ACKed its latest response of typ, sent at
// sentAt: every change queued before that response is converged for typ.
func (t *sloTracker) acked(c *conn, typ string, sentAt time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.proxies[c.proxy.ID]
	if p == nil {
		return
	}
	now := t.now()
	for _, pc := range p.pending {
		if pc.types[typ] && !pc.queued.After(sentAt) {
			delete(pc.types, typ)
			if pc.handled && len(pc.types) == 0 {
				t.converge(p, c.proxy.ID, pc, now.Sub(pc.start), now)
			}
		}
	}
	t.prune(p)
}

// converge records one converged change; t.mu is held.
func (t *sloTracker) converge(p *proxySLO, id string, pc *pendingChange, d time.Duration, now time.Time) {
	pc.reported = true
	p.last, p.lastAt = d, now
	if d >= p.worst {
		p.worst, p.worstA = d, now
	}
	p.converged++
	t.converged.WithLabelValues(p.kind).Inc()
	if t.objective > 0 && d > t.objective {
		p.missed++
		t.missed.WithLabelValues(p.kind).Inc()
	}
	pc.rec.convergedFor(SlowProxy{ID: id, Type: p.kind, Duration: d.Round(time.Microsecond).String(), d: d})
}

// prune drops converged changes and handled ones that sent nothing; t.mu
// is held.
func (t *sloTracker) prune(p *proxySLO) {
	p.pending = slices.DeleteFunc(p.pending, func(pc *pendingChange) bool {
		return pc.reported || (pc.handled && len(pc.types) == 0)
	})
}

// forget drops proxies gone for long; t.mu is held.
func (t *sloTracker) forget() {
	now := t.now()
	for id, p := range t.proxies {
		if p.streams <= 0 && now.Sub(p.gone) > forgetAfter {
			delete(t.proxies, id)
		}
	}
}

// status is id's convergence for /debug/syncz.
func (t *sloTracker) status(id string) *ConvergenceStatus {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.proxies[id]
	if p == nil {
		return nil
	}
	s := &ConvergenceStatus{Converged: p.converged, Missed: p.missed, Pending: len(p.pending), LastAt: p.lastAt, WorstAt: p.worstA}
	if t.objective > 0 {
		s.Objective = t.objective.String()
	}
	if p.converged > 0 {
		s.Last, s.Worst = p.last.Round(time.Microsecond).String(), p.worst.Round(time.Microsecond).String()
	}
	return s
}

// convergedFor records that the push converged for one proxy, keeping
// the slowest few.
func (r *pushRecord) convergedFor(sp SlowProxy) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.v.Converged++
	r.v.Slowest = append(r.v.Slowest, sp)
	slices.SortStableFunc(r.v.Slowest, func(a, b SlowProxy) int { return cmp.Compare(b.d, a.d) })
	if len(r.v.Slowest) > maxSlowest {
		r.v.Slowest = r.v.Slowest[:maxSlowest]
	}
}
