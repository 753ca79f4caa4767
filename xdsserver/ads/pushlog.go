package ads

import (
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/baremesh/baremesh/core/push"
)

// PushView is one push as /debug/pushz shows it: what triggered it and
// what it cost across every connection it reached.
type PushView struct {
	At        time.Time    `json:"at"`
	Full      bool         `json:"full"`
	Reasons   push.Reasons `json:"reasons"`
	Configs   []string     `json:"configs,omitempty"`
	Services  []string     `json:"services,omitempty"`
	Endpoints []string     `json:"endpoints,omitempty"`
	Proxies   int          `json:"proxies"`
	// Filled in as connections finish.
	Done      int            `json:"proxiesDone"`
	Responses map[string]int `json:"responsesByType"`
	Bytes     int            `json:"bytes"`
	Duration  string         `json:"duration"`
	// Converged counts the proxies that ACKed the change; Slowest are the
	// slowest of them (slo.go).
	Converged int         `json:"proxiesConverged"`
	Slowest   []SlowProxy `json:"slowestProxies,omitempty"`
}

// pushRecord is a pushView being filled in by the connections.
type pushRecord struct {
	mu sync.Mutex
	v  PushView
}

const pushHistory = 100

type pushLog struct {
	mu   sync.Mutex
	recs []*pushRecord
}

// keys lists up to 20 keys, sorted.
func keys[K interface {
	comparable
	String() string
}](m map[K]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k.String())
	}
	slices.Sort(out)
	return out[:min(len(out), 20)]
}

func (l *pushLog) add(req *push.Request, proxies int) *pushRecord {
	r := &pushRecord{v: PushView{At: time.Now(), Full: req.Full, Reasons: req.Reasons, Proxies: proxies, Responses: map[string]int{},
		Configs: keys(req.Configs), Services: keys(req.Services), Endpoints: keys(req.Endpoints)}}
	l.mu.Lock()
	l.recs = append(l.recs, r)
	if len(l.recs) > pushHistory {
		l.recs = l.recs[len(l.recs)-pushHistory:]
	}
	l.mu.Unlock()
	return r
}

// sent records one response of the push.
func (r *pushRecord) sent(typ string, bytes int) {
	r.mu.Lock()
	r.v.Responses[typ]++
	r.v.Bytes += bytes
	r.mu.Unlock()
}

// finished records that one connection handled the push.
func (r *pushRecord) finished() {
	r.mu.Lock()
	r.v.Done++
	r.v.Duration = time.Since(r.v.At).String()
	r.mu.Unlock()
}

// Pushes returns the recent pushes, newest first.
func (s *Server) Pushes() []PushView {
	s.pushes.mu.Lock()
	recs := slices.Clone(s.pushes.recs)
	s.pushes.mu.Unlock()
	out := make([]PushView, 0, len(recs))
	for i := len(recs) - 1; i >= 0; i-- {
		r := recs[i]
		r.mu.Lock()
		v := r.v
		v.Responses = maps.Clone(v.Responses)
		v.Slowest = slices.Clone(v.Slowest)
		r.mu.Unlock()
		out = append(out, v)
	}
	return out
}
