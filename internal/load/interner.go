package load

import (
	"errors"
	"fmt"
	"hash/maphash"
	"runtime"
	"sync"
	"sync/atomic"
	"weak"
)

// interner shares Resources and Sets between proxies. Entries are weak:
// a Set or Resource no proxy holds any more is collected and forgotten.
// It is safe for concurrent use.
type interner struct {
	mu   sync.Mutex
	res  map[resKey]weak.Pointer[Resource]
	sets map[setKey]weak.Pointer[Set]
	// roots remembers, by type, the set that followed from no set.
	roots [numTypes]atomic.Pointer[applyMemo]
}

func newInterner() *interner {
	return &interner{res: map[resKey]weak.Pointer[Resource]{}, sets: map[setKey]weak.Pointer[Set]{}}
}

// applyKey identifies what a response does to a set.
type applyKey struct {
	digest uint64
	n      int
	delta  bool
	full   bool
}

// apply returns old with resp's resources applied: with full (a SotW
// response of a wildcard type) they are the whole new content, otherwise
// they are added or replaced, and a Delta response's removals removed.
// A bad resource is an error, which the proxy NACKs; a response that
// does not parse is an errMalformed.
//
// Proxies holding the same set that receive the same resources get the
// same set, so old remembers the latest result by the response's digest
// (for a proxy holding none yet, roots does): of 2,000 proxies taking one
// config change, the first decodes it and the others look it up.
func (in *interner) apply(t Type, old *Set, resp *response, full bool) (*Set, error) {
	k := applyKey{digest: resp.digest, n: len(resp.elems), delta: resp.delta, full: full}
	memo := &in.roots[t]
	if old != nil {
		memo = &old.next
	}
	if m := memo.Load(); m != nil && m.key == k {
		if out := m.out.Value(); out != nil {
			return out, nil
		}
	}
	if err := resp.parse(); err != nil {
		return nil, fmt.Errorf("%w: %w", errMalformed, err)
	}
	put, err := in.collect(t, resp)
	if err != nil {
		return nil, err
	}
	out := in.update(t, old, put, resp.removed, full)
	memo.Store(&applyMemo{key: k, out: weak.Make(out)})
	return out, nil
}

var errDuplicate = errors.New("duplicate resource name")

// errMalformed marks a response that does not parse. The proxy ends the
// stream, as it would if grpc could not decode the message, instead of
// NACKing.
var errMalformed = errors.New("malformed response")

// collect decodes a response's resources into entries by name.
func (in *interner) collect(t Type, resp *response) (map[string]entry, error) {
	if resp.delta {
		for _, rr := range resp.res {
			if rr.hasAny && rr.name.n == 0 {
				return nil, errors.New("delta resource without a name")
			}
		}
	}
	put := make(map[string]entry, len(resp.res))
	var mismatch error
	for _, rr := range resp.res {
		if resp.delta && !rr.hasAny {
			continue // a Delta TTL heartbeat: nothing changes
		}
		r, err := in.resource(t, resp.bytes(rr.typeURL), resp.bytes(rr.value))
		if err != nil {
			return nil, err
		}
		name := r.Name
		var version string
		if resp.delta {
			if given := resp.bytes(rr.name); string(given) != r.Name {
				name = string(given)
				if mismatch == nil {
					mismatch = fmt.Errorf("resource named %q holds %q", name, r.Name)
				}
			}
			version = string(resp.bytes(rr.version))
		}
		if _, dup := put[name]; dup {
			return nil, errors.Join(errDuplicate, errors.New(name))
		}
		put[name] = entry{res: r, version: version}
	}
	if mismatch != nil {
		return nil, mismatch
	}
	return put, nil
}

// resource returns the decoded resource of an Any's type URL and value,
// decoding it only the first time its content is seen.
func (in *interner) resource(t Type, typeURL, value []byte) (*Resource, error) {
	if string(typeURL) != t.URL() {
		return nil, fmt.Errorf("resource of type %q in a %s response", typeURL, t)
	}
	k := resKey{t, maphash.Bytes(seed, value), len(value)}
	in.mu.Lock()
	r := in.res[k].Value()
	in.mu.Unlock()
	if r != nil {
		return r, nil
	}
	r, err := decode(t, value)
	if err != nil {
		return nil, err
	}
	r.hash, r.Size = k.hash, k.size
	in.mu.Lock()
	defer in.mu.Unlock()
	if old := in.res[k].Value(); old != nil {
		return old, nil
	}
	in.res[k] = weak.Make(r)
	runtime.AddCleanup(r, func(k resKey) {
		in.mu.Lock()
		if in.res[k].Value() == nil {
			delete(in.res, k)
		}
		in.mu.Unlock()
	}, k)
	return r, nil
}

// update returns the set old with put added or replaced and del removed;
// with full, put is the whole new content. A name twice in put is an
// error (the protocol says to NACK it).
func (in *interner) update(t Type, old *Set, put map[string]entry, del []string, full bool) *Set {
	var sum uint64
	n := len(put)
	if !full && old != nil {
		sum, n = old.sum, len(old.m)
		for name, e := range put {
			if o, ok := old.m[name]; ok {
				sum -= o.hash(name)
				n--
			}
			sum += e.hash(name)
			n++
		}
		for _, name := range del {
			if _, inPut := put[name]; inPut {
				continue
			}
			if o, ok := old.m[name]; ok {
				sum -= o.hash(name)
				n--
			}
		}
	} else {
		for name, e := range put {
			sum += e.hash(name)
		}
	}
	k := setKey{t, sum, n}
	if old != nil && old.sum == sum && len(old.m) == n {
		return old
	}
	in.mu.Lock()
	s := in.sets[k].Value()
	in.mu.Unlock()
	if s != nil {
		return s
	}
	m := make(map[string]entry, n)
	if !full && old != nil {
		for name, e := range old.m {
			m[name] = e
		}
		for _, name := range del {
			delete(m, name)
		}
	}
	for name, e := range put {
		m[name] = e
	}
	s = &Set{t: t, sum: sum, m: m}
	in.mu.Lock()
	defer in.mu.Unlock()
	if o := in.sets[k].Value(); o != nil {
		return o
	}
	in.sets[k] = weak.Make(s)
	runtime.AddCleanup(s, func(k setKey) {
		in.mu.Lock()
		if in.sets[k].Value() == nil {
			delete(in.sets, k)
		}
		in.mu.Unlock()
	}, k)
	return s
}

// keepOnly drops the resources whose names are not in names, as Envoy
// forgets resources it no longer subscribes to. Both lists are sorted,
// so one merge finds them; s remembers the answer for the latest names.
func (in *interner) keepOnly(s *Set, names *nameList) *Set {
	if s == nil {
		return nil
	}
	if m := s.kept.Load(); m != nil && m.names == names {
		if out := m.out.Value(); out != nil {
			return out
		}
	}
	out := s
	if del := minus(s.sortedNames(), names.list()); len(del) > 0 {
		out = in.update(s.t, s, nil, del, false)
	}
	s.kept.Store(&keptMemo{names: names, out: weak.Make(out)})
	return out
}
