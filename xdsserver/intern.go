package xdsserver

import (
	"crypto/sha256"
	"sync"
	"weak"

	"google.golang.org/protobuf/types/known/anypb"
)

// interner shares identical encoded resources between connections: every
// proxy without Sidecar scoping gets the same clusters and routes, and
// each connection keeps what it sent (for diffs and config_dump), so
// without sharing memory grows with proxies × config. Entries are weak:
// a resource no connection holds any more is collected.
type interner struct {
	mu sync.Mutex
	m  map[[32]byte]weak.Pointer[anypb.Any]
	// sweepAt is the size at which dead entries are swept next.
	sweepAt int
}

func newInterner() *interner {
	return &interner{m: map[[32]byte]weak.Pointer[anypb.Any]{}, sweepAt: 1024}
}

// intern returns the shared Any for bytes of type typeURL, making it from
// a when there is none. The result must not be altered.
func (in *interner) intern(typeURL string, b []byte, a *anypb.Any) (*anypb.Any, [32]byte) {
	h := sha256.New()
	h.Write([]byte(typeURL))
	h.Write(b)
	var sum [32]byte
	copy(sum[:], h.Sum(nil))
	in.mu.Lock()
	defer in.mu.Unlock()
	if p, ok := in.m[sum]; ok {
		if v := p.Value(); v != nil {
			return v, sum
		}
	}
	in.m[sum] = weak.Make(a)
	if len(in.m) >= in.sweepAt {
		for k, p := range in.m {
			if p.Value() == nil {
				delete(in.m, k)
			}
		}
		in.sweepAt = 2*len(in.m) + 1024
	}
	return a, sum
}
