package xdsserver

import (
	stdmaps "maps"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/baremesh/baremesh/core/push"
)

// pushRecord is one push as /debug/pushz shows it: what triggered it and
// what it cost across every connection it reached.
type pushRecord struct {
	mu        sync.Mutex
	At        time.Time      `json:"at"`
	Full      bool           `json:"full"`
	Reasons   map[string]int `json:"reasons"`
	Configs   []string       `json:"configs,omitempty"`
	Services  []string       `json:"services,omitempty"`
	Endpoints []string       `json:"endpoints,omitempty"`
	Proxies   int            `json:"proxies"`
	// Filled in as connections finish.
	Done      int            `json:"proxiesDone"`
	Responses map[string]int `json:"responses"`
	Bytes     int            `json:"bytes"`
	Duration  time.Duration  `json:"durationNanos"`
}

const pushHistory = 100

type pushLog struct {
	mu   sync.Mutex
	recs []*pushRecord
}

func (l *pushLog) add(req *push.Request, proxies int) *pushRecord {
	r := &pushRecord{At: time.Now(), Full: req.Full, Reasons: req.Reasons, Proxies: proxies, Responses: map[string]int{}}
	const maxList = 20
	for k := range req.Configs {
		if len(r.Configs) < maxList {
			r.Configs = append(r.Configs, k.String())
		}
	}
	for k := range req.Services {
		if len(r.Services) < maxList {
			r.Services = append(r.Services, k.String())
		}
	}
	for k := range req.Endpoints {
		if len(r.Endpoints) < maxList {
			r.Endpoints = append(r.Endpoints, k.String())
		}
	}
	slices.Sort(r.Configs)
	slices.Sort(r.Services)
	slices.Sort(r.Endpoints)
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
	r.Responses[typ]++
	r.Bytes += bytes
	r.mu.Unlock()
}

// finished records that one connection handled the push.
func (r *pushRecord) finished() {
	r.mu.Lock()
	r.Done++
	r.Duration = time.Since(r.At)
	r.mu.Unlock()
}

// PushzHandler serves /debug/pushz: the recent pushes, newest first.
func (s *Server) PushzHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		s.pushes.mu.Lock()
		recs := slices.Clone(s.pushes.recs)
		s.pushes.mu.Unlock()
		type view struct {
			At        time.Time      `json:"at"`
			Full      bool           `json:"full"`
			Reasons   map[string]int `json:"reasons"`
			Configs   []string       `json:"configs,omitempty"`
			Services  []string       `json:"services,omitempty"`
			Endpoints []string       `json:"endpoints,omitempty"`
			Proxies   int            `json:"proxies"`
			Done      int            `json:"proxiesDone"`
			Responses map[string]int `json:"responsesByType"`
			Bytes     int            `json:"bytes"`
			Duration  string         `json:"duration"`
		}
		out := make([]view, 0, len(recs))
		for i := len(recs) - 1; i >= 0; i-- {
			r := recs[i]
			r.mu.Lock()
			out = append(out, view{At: r.At, Full: r.Full, Reasons: r.Reasons, Configs: r.Configs, Services: r.Services, Endpoints: r.Endpoints,
				Proxies: r.Proxies, Done: r.Done, Responses: stdmaps.Clone(r.Responses), Bytes: r.Bytes, Duration: r.Duration.String()})
			r.mu.Unlock()
		}
		writeJSON(w, out)
	})
}
