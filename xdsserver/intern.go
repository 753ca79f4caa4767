package xdsserver

import (
	"slices"
	"sync"
	"unique"
	"weak"
)

// interner shares identical encoded resources between connections and
// caches: every proxy without Sidecar scoping gets the same clusters and
// routes, and each connection keeps what it holds (for diffs and
// config_dump), so without sharing memory grows with proxies × config.
// Entries are weak: a resource nothing holds any more is collected.
type interner struct {
	mu sync.Mutex
	m  map[[32]byte]weak.Pointer[encoded]
	// sweepAt is the size at which dead entries are swept next.
	sweepAt int
}

func newInterner() *interner {
	return &interner{m: map[[32]byte]weak.Pointer[encoded]{}, sweepAt: 1024}
}

// intern returns the shared entry with e's sum, or e, which becomes it.
func (in *interner) intern(e *encoded) *encoded {
	in.mu.Lock()
	defer in.mu.Unlock()
	if p, ok := in.m[e.sum]; ok {
		if v := p.Value(); v != nil {
			return v
		}
	}
	in.m[e.sum] = weak.Make(e)
	if len(in.m) >= in.sweepAt {
		for k, p := range in.m {
			if p.Value() == nil {
				delete(in.m, k)
			}
		}
		in.sweepAt = 2*len(in.m) + 1024
	}
	return e
}

// nameList is a shared, sorted subscription list. Thousands of proxies
// subscribe to the same thousands of EDS names; each keeps a pointer.
type nameList struct {
	names []string
	// byHost indexes cluster names by host, built once on first use:
	// an endpoint push looks up only the changed services' clusters.
	hostOnce sync.Once
	byHost   map[string][]string
}

// clustersOf returns the names of the list whose cluster host is host.
func (l *nameList) clustersOf(host string) []string {
	l.hostOnce.Do(func() {
		l.byHost = map[string][]string{}
		for _, n := range l.names {
			h := clusterHost(n)
			l.byHost[h] = append(l.byHost[h], n)
		}
	})
	return l.byHost[host]
}

// lists shares subscription lists between connections.
type lists struct {
	mu sync.Mutex
	m  map[uint64]weak.Pointer[nameList]
	// wire finds a list by the hash of a request's names as sent
	// (sotwRequest.wireSum): the thousands of proxies that send the same
	// subscription find it without splitting the names into strings.
	wire map[uint64]weak.Pointer[nameList]
}

// byWire returns the list last resolved from names whose wire hash is h,
// or nil.
func (l *lists) byWire(h uint64) *nameList {
	l.mu.Lock()
	defer l.mu.Unlock()
	if p, ok := l.wire[h]; ok {
		return p.Value()
	}
	return nil
}

// setWire records nl as resolved from names whose wire hash is h.
func (l *lists) setWire(h uint64, nl *nameList) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.wire == nil {
		l.wire = map[uint64]weak.Pointer[nameList]{}
	}
	l.wire[h] = weak.Make(nl)
	if len(l.wire) > 4096 {
		for k, p := range l.wire {
			if p.Value() == nil {
				delete(l.wire, k)
			}
		}
	}
}

// get returns the shared list equal to names (sorted), whose hash is h.
// The caller keeps the *nameList (not only its slice) while it uses it,
// so that others find and share it.
func (l *lists) get(h uint64, names []string) *nameList {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[uint64]weak.Pointer[nameList]{}
	}
	if p, ok := l.m[h]; ok {
		if v := p.Value(); v != nil && slices.Equal(v.names, names) {
			return v
		}
	}
	nl := &nameList{names: make([]string, len(names))}
	for i, n := range names {
		nl.names[i] = unique.Make(n).Value()
	}
	l.m[h] = weak.Make(nl)
	if len(l.m) > 4096 {
		for k, p := range l.m {
			if p.Value() == nil {
				delete(l.m, k)
			}
		}
	}
	return nl
}
