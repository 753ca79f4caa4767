package ads

import (
	"sort"
	"time"

	"google.golang.org/protobuf/types/known/anypb"
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
	ID        string    `json:"id"`
	Conn      string    `json:"connection"`
	Peer      string    `json:"peer"`
	Type      string    `json:"type"`
	Proxyless bool      `json:"proxyless"`
	Namespace string    `json:"namespace"`
	IPs       []string  `json:"ips"`
	Connected time.Time `json:"connected"`
	// Identity is the authenticated SPIFFE ID, empty when unauthenticated.
	Identity string       `json:"identity,omitempty"`
	Types    []SyncStatus `json:"types"`
	// Convergence is the proxy's (node ID's) change→ACK record (slo.go).
	Convergence *ConvergenceStatus `json:"convergence,omitempty"`
}

// Syncz returns every connection's state.
func (s *Server) Syncz() []ProxyStatus {
	var out []ProxyStatus
	for _, c := range s.connsSorted() {
		ps := ProxyStatus{Identity: c.proxy.Identity.SPIFFEIDOrEmpty(), ID: c.proxy.ID, Conn: c.id, Peer: c.peer, Type: string(c.proxy.Type), Proxyless: c.proxy.Proxyless,
			Namespace: c.proxy.Namespace, IPs: c.proxy.IPs, Connected: c.connected}
		c.mu.Lock()
		for _, w := range c.subs {
			ss := SyncStatus{Type: w.typ.Short, Names: len(w.names), Wildcard: w.wildcard, SentVersion: w.sentVer, SentNonce: w.sentNonce,
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
		ps.Convergence = s.slo.status(c.proxy.ID)
		out = append(out, ps)
	}
	return out
}

// Dump is what one connection was last sent, by short type name.
type Dump struct {
	Connection string
	Types      map[string][]*anypb.Any
	// Errors are resources that could not be decoded, by short type.
	Errors map[string][]error
}

// Dumps returns what every connection whose proxy ID or connection ID is
// id holds, by type (for /debug/config_dump).
func (s *Server) Dumps(id string) []Dump {
	var out []Dump
	for _, c := range s.connsSorted() {
		if c.proxy.ID != id && c.id != id {
			continue
		}
		d := Dump{Connection: c.id, Types: map[string][]*anypb.Any{}, Errors: map[string][]error{}}
		c.mu.Lock()
		for _, w := range c.subs {
			for _, e := range w.held {
				a, err := e.Any()
				if err != nil {
					d.Errors[w.typ.Short] = append(d.Errors[w.typ.Short], err)
					continue
				}
				d.Types[w.typ.Short] = append(d.Types[w.typ.Short], a)
			}
		}
		c.mu.Unlock()
		out = append(out, d)
	}
	return out
}
