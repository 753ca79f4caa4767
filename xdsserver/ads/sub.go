package ads

import (
	"slices"
	"time"

	"github.com/baremesh/baremesh/core/push"
	"github.com/baremesh/baremesh/xdsserver/wire"
	"github.com/baremesh/baremesh/xdsserver/xdstype"
)

// sub is one type's subscription on one connection: what the proxy asked
// for, what it holds, and where the exchange of responses and ACKs
// stands. SotW and Delta share it; the few fields one variant alone uses
// are marked. The connection's loop goroutine writes it, holding c.mu;
// debug pages read it under c.mu.
type sub struct {
	typ      *xdstype.Type
	typeURL  string
	names    []string       // sorted; nil for a wildcard subscription
	list     *wire.NameList // owns names, shared with other connections
	wildcard bool

	nonce     int
	sentNonce string
	sentVer   string
	sentHash  uint64 // LDS, CDS: of the whole set (setSum)
	sentAt    time.Time
	// held is what the proxy holds, sorted by name (encode sorts every
	// generation) and shared with every other proxy that holds the same
	// resources: for EDS, RDS and Delta the items of heldList, for SotW
	// LDS and CDS the generated (cached) set.
	held     []*wire.Resource
	heldList *wire.HeldList
	// rejected: per resource, the version the proxy NACKed (EDS, RDS,
	// Delta); last: the last SotW EDS or RDS response, to roll back on its
	// NACK.
	rejected   map[string][32]byte
	last       sentResp
	ackedVer   string
	ackedAt    time.Time
	nack       *nack
	nackedHash uint64
	genErr     string
	// counts of what the client sent, for syncz and tests
	requests, acks, nacks int
	// pushStart is when the change behind the unACKed response happened,
	// for the convergence histogram.
	pushStart time.Time
	// awaitingAck: a response was sent and neither ACKed nor NACKed yet.
	awaitingAck bool

	// Delta xDS only: versions the client said it holds when it
	// (re)connected, and each unACKed response by nonce.
	initial  map[string]string
	inFlight map[string]sentResp
}

// sentResp is what a response of a named type (EDS, RDS, Delta) sent and
// removed, and what the proxy held before it, to roll back on its NACK.
// Held lists are never altered in place, so keeping prev costs nothing.
type sentResp struct {
	sent    []*wire.Resource
	removed []string
	prev    []*wire.Resource
}

// rollback undoes r on its NACK: what it sent is marked rejected, and the
// proxy holds again what it held before r, unless a later response
// replaced it since. c.mu is held.
func (w *sub) rollback(r sentResp, lists *wire.HeldLists) {
	if w.rejected == nil {
		w.rejected = map[string][32]byte{}
	}
	var back []*wire.Resource
	drop := map[string]bool{}
	restore := func(name string) {
		if old := wire.Find(r.prev, name); old != nil {
			back = append(back, old)
		} else {
			drop[name] = true
		}
	}
	for _, e := range r.sent {
		w.rejected[e.Name] = e.Sum
		if wire.Find(w.held, e.Name) == e {
			restore(e.Name)
		}
	}
	for _, name := range r.removed {
		if wire.Find(w.held, name) == nil {
			restore(name)
		}
	}
	w.hold(lists, back, drop)
}

// hold makes w hold what it holds with each of set replacing or adding
// the entry of its name and each name in drop removed, as a shared list
// (heldlists.go). c.mu is held.
func (w *sub) hold(lists *wire.HeldLists, set []*wire.Resource, drop map[string]bool) {
	w.heldList = lists.With(w.heldList, set, drop)
	w.held = w.heldList.Items
}

type nack struct {
	Nonce   string    `json:"nonce"`
	Version string    `json:"version"`
	Message string    `json:"message"`
	At      time.Time `json:"at"`
}

// setNames records the subscription of r and reports whether it
// changed. An ACK repeats the whole subscription (thousands of EDS
// names); the stream's resolver made it a shared list, so an unchanged
// subscription is the same list.
func (w *sub) setNames(r *wire.Request, lists *wire.HeldLists) bool {
	wildcard := r.List == nil
	if wildcard == w.wildcard && r.List == w.list && (wildcard || w.names != nil) {
		return false
	}
	w.wildcard = wildcard
	if wildcard {
		w.names, w.list = nil, nil
		return true
	}
	w.list = r.List
	w.names = w.list.Names
	// The client forgets what it unsubscribed: a later subscription of
	// the same name must be answered with the resource again.
	if w.typ.Partial {
		if drop := unsubscribed(w.held, w.names); drop != nil {
			w.hold(lists, nil, drop)
		}
		for name := range w.rejected {
			if _, ok := slices.BinarySearch(w.names, name); !ok {
				delete(w.rejected, name)
			}
		}
	}
	return true
}

// unsubscribed returns the names of held (sorted) not in names (sorted),
// or nil.
func unsubscribed(held []*wire.Resource, names []string) map[string]bool {
	var out map[string]bool
	j := 0
	for _, e := range held {
		for j < len(names) && names[j] != e.Name && names[j] < e.Name {
			j++
		}
		if j == len(names) || names[j] != e.Name {
			if out == nil {
				out = map[string]bool{}
			}
			out[e.Name] = true
		}
	}
	return out
}

// unheld returns the names of w's subscription the proxy holds no
// resource for: after a subscription change of EDS or RDS only those
// need generating, the others are current (a pending push sends any that
// are not). c.mu is held.
func (w *sub) unheld() []string {
	n := 0
	w.eachUnheld(func(string) { n++ })
	switch n {
	case len(w.names):
		return w.names // none held: the whole (shared) list
	case 0:
		return []string{}
	}
	out := make([]string, 0, n)
	w.eachUnheld(func(name string) { out = append(out, name) })
	return out
}

// eachUnheld calls fn with each subscribed name not in held (both
// sorted); c.mu is held.
func (w *sub) eachUnheld(fn func(string)) {
	i := 0
	for _, name := range w.names {
		// Names are interned (wire.Encode): == is a pointer compare, and most
		// subscribed names are held.
		for i < len(w.held) && w.held[i].Name != name && w.held[i].Name < name {
			i++
		}
		if i == len(w.held) || w.held[i].Name != name {
			fn(name)
		}
	}
}

// notePushStart remembers when the change behind a response happened;
// c.mu is held.
func (w *sub) notePushStart(req *push.Request) {
	if req != nil && !req.Start.IsZero() && (w.pushStart.IsZero() || req.Start.Before(w.pushStart)) {
		w.pushStart = req.Start
	}
}
