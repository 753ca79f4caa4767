package load

import (
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"weak"
)

// Set is the resources of one type a proxy holds. It is immutable and
// interned by content: proxies holding the same resources share one Set.
// Its sum is the sum of its entries' hashes, so an update computes the
// new identity without building a map.
//
// Thousands of proxies holding one Set ask it the same questions (which
// set follows from this response, which subset is subscribed, are the
// dependencies there), so it remembers the latest answer to each; the
// answers are pure functions of the Set and the question.
type Set struct {
	t   Type
	sum uint64
	m   map[string]entry

	namesOnce sync.Once
	names     []string // sorted

	depsOnce sync.Once
	deps     *nameList

	next  atomic.Pointer[applyMemo] // see interner.apply
	kept  atomic.Pointer[keptMemo]  // see interner.keepOnly
	holds atomic.Pointer[holdsMemo] // see holdsAll
}

type setKey struct {
	t   Type
	sum uint64
	n   int
}

// applyMemo is the set that followed from applying a response.
type applyMemo struct {
	key applyKey
	out weak.Pointer[Set]
}

// keptMemo is the subset of a set subscribed to by names.
type keptMemo struct {
	names *nameList
	out   weak.Pointer[Set]
}

type holdsMemo struct {
	names *nameList
	ok    bool
}

// Len is the number of resources.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.m)
}

// Get returns the named resource or nil.
func (s *Set) Get(name string) *Resource {
	if s == nil {
		return nil
	}
	return s.m[name].res
}

// Names returns the resource names, sorted.
func (s *Set) Names() []string {
	return slices.Clone(s.sortedNames())
}

// sortedNames is Names, shared: it must not be altered.
func (s *Set) sortedNames() []string {
	if s == nil {
		return nil
	}
	s.namesOnce.Do(func() {
		s.names = make([]string, 0, len(s.m))
		for n := range s.m {
			s.names = append(s.names, n)
		}
		sort.Strings(s.names)
	})
	return s.names
}

// Deps returns, sorted and without duplicates, the EDS names of a
// cluster set or the RDS names of a listener set. The slice is shared
// and must not be altered.
func (s *Set) Deps() []string { return s.depList().list() }

// depList is Deps as a nameList: proxies holding the set subscribe with
// one list and one encoding of it.
func (s *Set) depList() *nameList {
	if s == nil {
		return nil
	}
	s.depsOnce.Do(func() {
		seen := map[string]bool{}
		var deps []string
		for _, e := range s.m {
			for _, d := range e.res.deps {
				if !seen[d] {
					seen[d] = true
					deps = append(deps, d)
				}
			}
		}
		sort.Strings(deps)
		s.deps = newNameList(deps)
	})
	return s.deps
}

// holdsAll reports whether s holds every one of names.
func (s *Set) holdsAll(names *nameList) bool {
	if names.len() == 0 {
		return true
	}
	if s == nil {
		return false
	}
	if m := s.holds.Load(); m != nil && m.names == names {
		return m.ok
	}
	ok := len(minus(names.list(), s.sortedNames())) == 0
	s.holds.Store(&holdsMemo{names: names, ok: ok})
	return ok
}

// minus returns the names of a (sorted) that are not in b (sorted), by
// one merge of the two lists.
func minus(a, b []string) []string {
	var out []string
	j := 0
	for _, n := range a {
		for j < len(b) && b[j] < n {
			j++
		}
		if j == len(b) || b[j] != n {
			out = append(out, n)
		}
	}
	return out
}

func (s *Set) versions() map[string]string {
	if s == nil || len(s.m) == 0 {
		return nil
	}
	out := make(map[string]string, len(s.m))
	for n, e := range s.m {
		out[n] = e.version
	}
	return out
}
