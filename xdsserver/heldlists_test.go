package xdsserver

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

func heldEntry(name string, version int) *encoded {
	body := fmt.Appendf(nil, "%s/%d", name, version)
	return &encoded{name: name, sum: sha256.Sum256(body), framed: body}
}

// naiveWith is what heldLists.with must return, written plainly.
func naiveWith(cur []*encoded, set []*encoded, drop map[string]bool) []*encoded {
	m := map[string]*encoded{}
	for _, e := range cur {
		if !drop[e.name] {
			m[e.name] = e
		}
	}
	for _, e := range set {
		m[e.name] = e
	}
	var out []*encoded
	for _, e := range m {
		out = append(out, e)
	}
	slices.SortFunc(out, byName)
	return out
}

// Random changes give the same lists as the plain merge, and two
// connections that make the same changes share one list.
func TestHeldListsShareAndMerge(t *testing.T) {
	var lists heldLists
	rng := rand.New(rand.NewPCG(1, 2))
	entries := map[string][]*encoded{}
	entry := func(name string, v int) *encoded {
		for len(entries[name]) <= v {
			entries[name] = append(entries[name], heldEntry(name, len(entries[name])))
		}
		return entries[name][v]
	}
	var a, b *heldList
	var want []*encoded
	for step := range 500 {
		var set []*encoded
		drop := map[string]bool{}
		for range rng.IntN(5) {
			set = append(set, entry(fmt.Sprintf("c%02d", rng.IntN(30)), rng.IntN(3)))
		}
		set = slices.CompactFunc(slices.SortedFunc(slices.Values(set), byName), func(x, y *encoded) bool { return x.name == y.name })
		for range rng.IntN(3) {
			drop[fmt.Sprintf("c%02d", rng.IntN(30))] = true
		}
		want = naiveWith(want, set, drop)
		a = lists.with(a, set, drop)
		b = lists.with(b, slices.Clone(set), drop)
		if !slices.Equal(a.items, want) {
			t.Fatalf("step %d: with = %v, want %v", step, heldNames(a.items), heldNames(want))
		}
		if a != b {
			t.Fatalf("step %d: two connections making the same change hold different lists", step)
		}
		if a.id != listID(a.items) {
			t.Fatalf("step %d: id %x, want %x", step, a.id, listID(a.items))
		}
		var framed []byte
		for _, e := range a.items {
			framed = append(framed, e.framed...)
		}
		if got := a.sotwJoined().ReadOnlyData(); !bytes.Equal(got, framed) {
			t.Fatalf("step %d: joined %q, want %q", step, got, framed)
		}
	}
}

func heldNames(items []*encoded) []string {
	var out []string
	for _, e := range items {
		out = append(out, e.name)
	}
	return out
}
