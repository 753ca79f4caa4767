package xdsserver

import (
	"sync"
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
