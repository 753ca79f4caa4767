package wire

import (
	"slices"
	"sync"
	"unique"
	"weak"
)

// Interner shares identical Resource resources between connections and
// caches: every proxy without Sidecar scoping gets the same clusters and
// routes, and each connection keeps what it holds (for diffs and
// config_dump), so without sharing memory grows with proxies × config.
// Entries are weak: a resource nothing holds any more is collected.
type Interner struct {
	mu sync.Mutex
	m  map[[32]byte]weak.Pointer[Resource]
	// sweepAt is the size at which dead entries are swept next.
	sweepAt int
}

func NewInterner() *Interner {
	return &Interner{m: map[[32]byte]weak.Pointer[Resource]{}, sweepAt: 1024}
}

// Intern returns the shared entry with e's sum, or e, which becomes it.
func (in *Interner) Intern(e *Resource) *Resource {
	in.mu.Lock()
	defer in.mu.Unlock()
	if p, ok := in.m[e.Sum]; ok {
		if v := p.Value(); v != nil {
			return v
		}
	}
	in.m[e.Sum] = weak.Make(e)
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

// NameList is a shared, sorted subscription list. Thousands of proxies
// subscribe to the same thousands of EDS names; each keeps a pointer.
type NameList struct {
	Names []string
	// byHost indexes cluster names by host, built once on first use:
	// an endpoint push looks up only the changed services' clusters.
	hostOnce sync.Once
	byHost   map[string][]string
}

// Slice returns the names (nil for a nil list); they must not be altered.
func (l *NameList) Slice() []string {
	if l == nil {
		return nil
	}
	return l.Names
}

// ClustersOf returns the names of the list whose cluster host is host.
func (l *NameList) ClustersOf(host string) []string {
	l.hostOnce.Do(func() {
		l.byHost = map[string][]string{}
		for _, n := range l.Names {
			h := ClusterHost(n)
			l.byHost[h] = append(l.byHost[h], n)
		}
	})
	return l.byHost[host]
}

// lists shares subscription lists between connections.
type Lists struct {
	mu sync.Mutex
	m  map[uint64]weak.Pointer[NameList]
	// wire finds a list by the hash of a request's names as sent
	// (Request.wireSum): the thousands of proxies that send the same
	// subscription find it without splitting the names into strings.
	wire map[uint64]weak.Pointer[NameList]
}

// byWire returns the list last resolved from names whose wire hash is h,
// or nil.
func (l *Lists) byWire(h uint64) *NameList {
	l.mu.Lock()
	defer l.mu.Unlock()
	if p, ok := l.wire[h]; ok {
		return p.Value()
	}
	return nil
}

// setWire records nl as resolved from names whose wire hash is h.
func (l *Lists) setWire(h uint64, nl *NameList) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.wire == nil {
		l.wire = map[uint64]weak.Pointer[NameList]{}
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

// Get returns the shared list equal to names (sorted), whose hash is h.
// The caller keeps the *NameList (not only its slice) while it uses it,
// so that others find and share it.
func (l *Lists) Get(h uint64, names []string) *NameList {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[uint64]weak.Pointer[NameList]{}
	}
	if p, ok := l.m[h]; ok {
		if v := p.Value(); v != nil && slices.Equal(v.Names, names) {
			return v
		}
	}
	nl := &NameList{Names: make([]string, len(names))}
	for i, n := range names {
		nl.Names[i] = unique.Make(n).Value()
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
