package xdsserver

import (
	"encoding/json"
	"net/http"
	"sort"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
)

// SyncStatus is one type's state on one connection, as /debug/syncz shows.
type SyncStatus struct {
	Type        string    `json:"type"`
	Names       int       `json:"subscribedNames"`
	Wildcard    bool      `json:"wildcard"`
	SentVersion string    `json:"sentVersion,omitempty"`
	SentNonce   string    `json:"sentNonce,omitempty"`
	SentAt      time.Time `json:"sentAt,omitzero"`
	Resources   int       `json:"resources"`
	AckedVer    string    `json:"ackedVersion,omitempty"`
	AckedAt     time.Time `json:"ackedAt,omitzero"`
	LastNack    *nack     `json:"lastNack,omitempty"`
	GenError    string    `json:"generationError,omitempty"`
	Requests    int       `json:"requests"`
	Acks        int       `json:"acks"`
	Nacks       int       `json:"nacks"`
}

// ProxyStatus is one connection on /debug/syncz.
type ProxyStatus struct {
	ID        string       `json:"id"`
	Conn      string       `json:"connection"`
	Peer      string       `json:"peer"`
	Type      string       `json:"type"`
	Proxyless bool         `json:"proxyless"`
	Namespace string       `json:"namespace"`
	IPs       []string     `json:"ips"`
	Connected time.Time    `json:"connected"`
	Types     []SyncStatus `json:"types"`
}

// Syncz returns every connection's state.
func (s *Server) Syncz() []ProxyStatus {
	var out []ProxyStatus
	for _, c := range s.Conns() {
		ps := ProxyStatus{ID: c.proxy.ID, Conn: c.id, Peer: c.peer, Type: string(c.proxy.Type), Proxyless: c.proxy.Proxyless,
			Namespace: c.proxy.Namespace, IPs: c.proxy.IPs, Connected: c.connected}
		c.mu.Lock()
		for t, w := range c.watches {
			ss := SyncStatus{Type: shortType(t), Names: len(w.names), Wildcard: w.wildcard, SentVersion: w.sentVer, SentNonce: w.sentNonce,
				SentAt: w.sentAt, Resources: len(w.held), AckedVer: w.ackedVer, AckedAt: w.ackedAt, GenError: w.genErr,
				Requests: w.requests, Acks: w.acks, Nacks: w.nacks}
			if w.nack != nil {
				n := *w.nack
				ss.LastNack = &n
			}
			ps.Types = append(ps.Types, ss)
		}
		c.mu.Unlock()
		sort.Slice(ps.Types, func(i, j int) bool { return ps.Types[i].Type < ps.Types[j].Type })
		out = append(out, ps)
	}
	return out
}

// SyncHandler serves /debug/syncz.
func (s *Server) SyncHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		st := s.Syncz()
		if st == nil {
			st = []ProxyStatus{}
		}
		writeJSON(w, st)
	})
}

// ConfigDumpHandler serves /debug/config_dump?proxy=ID: what the proxy
// (every connection whose proxy ID or connection ID is ID) was last sent,
// by type.
func (s *Server) ConfigDumpHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.URL.Query().Get("proxy")
		if id == "" {
			http.Error(w, "missing ?proxy=ID (see /debug/syncz)", http.StatusBadRequest)
			return
		}
		type dump struct {
			Connection string                       `json:"connection"`
			Types      map[string][]json.RawMessage `json:"types"`
		}
		var out []dump
		for _, c := range s.Conns() {
			if c.proxy.ID != id && c.id != id {
				continue
			}
			d := dump{Connection: c.id, Types: map[string][]json.RawMessage{}}
			c.mu.Lock()
			for t, wa := range c.watches {
				for _, e := range wa.held {
					a, err := e.any()
					var b []byte
					if err == nil {
						b, err = protojson.Marshal(a)
					}
					if err != nil {
						b, _ = json.Marshal(map[string]string{"error": err.Error()})
					}
					d.Types[shortType(t)] = append(d.Types[shortType(t)], b)
				}
			}
			c.mu.Unlock()
			out = append(out, d)
		}
		if out == nil {
			http.Error(w, "no connected proxy "+id, http.StatusNotFound)
			return
		}
		writeJSON(w, out)
	})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
