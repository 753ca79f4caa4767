package wire

import (
	"encoding/binary"
	"iter"
	"slices"
	"sync"
	"weak"

	"google.golang.org/grpc/mem"
)

// Held lists. Proxies subscribed to the same clusters hold the same EDS
// resources, and a list per connection cost 2,000 proxies × 2,000
// clusters × 8 bytes (32 MB) and as much again in garbage on every
// endpoint push. Lists are shared by content: a connection works out the
// identity of the list it is about to hold from the one it holds and the
// change (a sum of the entries' content hashes; the entries are unique
// by name and sorted, so the sum needs no order), takes the list with
// that identity if another connection already built it, and builds it
// only otherwise. Lists are never altered, so a response's NACK can roll
// back to the list held before it.

// HeldList is an immutable list of held resources, sorted by name.
type HeldList struct {
	Items []*Resource
	id    uint64
	// The items framed for a SotW and a Delta response in one buffer each,
	// made on first use and shared by every connection that sends the
	// whole list (an initial response): gRPC's writer then handles one
	// part, not thousands.
	sotwOnce, deltaOnce sync.Once
	sotw, delta         mem.Buffer
}

func (l *HeldList) SotWJoined() mem.Buffer {
	l.sotwOnce.Do(func() { l.sotw = joinFramed(l.Items, func(e *Resource) []byte { return e.framed }) })
	return l.sotw
}

func (l *HeldList) DeltaJoined() mem.Buffer {
	l.deltaOnce.Do(func() { l.delta = JoinedDelta(l.Items) })
	return l.delta
}

func joinFramed(items []*Resource, framed func(*Resource) []byte) mem.Buffer {
	n := 0
	for _, e := range items {
		n += len(framed(e))
	}
	b := make([]byte, 0, n)
	for _, e := range items {
		b = append(b, framed(e)...)
	}
	return mem.SliceBuffer(b)
}

// HeldLists interns HeldLists by identity; entries are weak.
type HeldLists struct {
	mu      sync.Mutex
	m       map[uint64]weak.Pointer[HeldList]
	sweepAt int
}

func entryID(e *Resource) uint64 { return binary.LittleEndian.Uint64(e.Sum[:8]) }

func listID(items []*Resource) uint64 {
	var id uint64
	for _, e := range items {
		id += entryID(e)
	}
	return id
}

// with returns the shared list holding cur's items (cur may be nil: no
// items) with each of set replacing or adding the entry of its name and
// each name in drop removed.
func (l *HeldLists) With(cur *HeldList, set []*Resource, drop map[string]bool) *HeldList {
	var items []*Resource
	var id uint64
	if cur != nil {
		items, id = cur.Items, cur.id
	}
	if !slices.IsSortedFunc(set, ByName) {
		set = slices.SortedFunc(slices.Values(set), ByName)
	}
	for _, e := range set {
		if old := Find(items, e.Name); old != nil {
			id -= entryID(old)
		}
		id += entryID(e)
	}
	for name := range drop {
		if old := Find(items, name); old != nil && Find(set, name) == nil {
			id -= entryID(old)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m, l.sweepAt = map[uint64]weak.Pointer[HeldList]{}, 1024
	}
	if p, ok := l.m[id]; ok {
		if v := p.Value(); v != nil && equalSeq(v.Items, merged(items, set, drop)) {
			return v
		}
	}
	n := &HeldList{Items: slices.Collect(merged(items, set, drop)), id: id}
	l.m[id] = weak.Make(n)
	if len(l.m) >= l.sweepAt {
		for k, p := range l.m {
			if p.Value() == nil {
				delete(l.m, k)
			}
		}
		l.sweepAt = 2*len(l.m) + 1024
	}
	return n
}

// merged yields held (sorted by name) with each of set (sorted) replacing
// or adding the entry of its name, and each name in drop removed.
func merged(held, set []*Resource, drop map[string]bool) iter.Seq[*Resource] {
	return func(yield func(*Resource) bool) {
		i, j := 0, 0
		for i < len(held) || j < len(set) {
			var e *Resource
			switch {
			case j == len(set) || (i < len(held) && held[i].Name < set[j].Name):
				e = held[i]
				i++
				if drop[e.Name] {
					continue
				}
			case i == len(held) || set[j].Name < held[i].Name:
				e = set[j]
				j++
			default: // same name: the new one
				e = set[j]
				i++
				j++
			}
			if !yield(e) {
				return
			}
		}
	}
}

func equalSeq(items []*Resource, seq iter.Seq[*Resource]) bool {
	k := 0
	for e := range seq {
		if k == len(items) || items[k] != e {
			return false
		}
		k++
	}
	return k == len(items)
}
