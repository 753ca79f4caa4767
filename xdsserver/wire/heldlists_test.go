package wire

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

func heldEntry(name string, version int) *Resource {
	body := fmt.Appendf(nil, "%s/%d", name, version)
	return &Resource{Name: name, Sum: sha256.Sum256(body), framed: body}
}

// naiveWith is what HeldLists.with must return, written plainly.
func naiveWith(cur []*Resource, set []*Resource, drop map[string]bool) []*Resource {
	m := map[string]*Resource{}
	for _, e := range cur {
		if !drop[e.Name] {
			m[e.Name] = e
		}
	}
	for _, e := range set {
		m[e.Name] = e
	}
	var out []*Resource
	for _, e := range m {
		out = append(out, e)
	}
	slices.SortFunc(out, ByName)
	return out
}

// Random changes give the same lists as the plain merge, and two
// connections that make the same changes share one list.
func TestHeldListsShareAndMerge(t *testing.T) {
	var lists HeldLists
	rng := rand.New(rand.NewPCG(1, 2))
	entries := map[string][]*Resource{}
	entry := func(name string, v int) *Resource {
		for len(entries[name]) <= v {
			entries[name] = append(entries[name], heldEntry(name, len(entries[name])))
		}
		return entries[name][v]
	}
	var a, b *HeldList
	var want []*Resource
	for step := range 500 {
		var set []*Resource
		drop := map[string]bool{}
		for range rng.IntN(5) {
			set = append(set, entry(fmt.Sprintf("c%02d", rng.IntN(30)), rng.IntN(3)))
		}
		set = slices.CompactFunc(slices.SortedFunc(slices.Values(set), ByName), func(x, y *Resource) bool { return x.Name == y.Name })
		for range rng.IntN(3) {
			drop[fmt.Sprintf("c%02d", rng.IntN(30))] = true
		}
		want = naiveWith(want, set, drop)
		a = lists.With(a, set, drop)
		b = lists.With(b, slices.Clone(set), drop)
		if !slices.Equal(a.Items, want) {
			t.Fatalf("step %d: with = %v, want %v", step, heldNames(a.Items), heldNames(want))
		}
		if a != b {
			t.Fatalf("step %d: two connections making the same change hold different lists", step)
		}
		if a.id != listID(a.Items) {
			t.Fatalf("step %d: id %x, want %x", step, a.id, listID(a.Items))
		}
		var framed []byte
		for _, e := range a.Items {
			framed = append(framed, e.framed...)
		}
		if got := a.SotWJoined().ReadOnlyData(); !bytes.Equal(got, framed) {
			t.Fatalf("step %d: joined %q, want %q", step, got, framed)
		}
	}
}

func heldNames(items []*Resource) []string {
	var out []string
	for _, e := range items {
		out = append(out, e.Name)
	}
	return out
}
