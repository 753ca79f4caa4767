package store

import (
	"strings"
	"testing"

	"github.com/baremesh/baremesh/core/config"
)

// TestSortedView: Sorted gives List's order and namespace range without
// copies; a view taken before a change keeps showing what it showed, and
// the next read shows the change. Conflicts follow the holders as keys
// come and go.
func TestSortedView(t *testing.T) {
	a := NewAggregate()
	one, two := a.AddSource("one"), a.AddSource("two")
	one.Update([]config.Config{se("b", "y", "1"), se("a", "z", "1"), se("b", "x", "1"), se("c", "w", "1")}, nil)
	names := func(v []*config.Config) string {
		var out []string
		for _, c := range v {
			out = append(out, c.Namespace+"/"+c.Name)
		}
		return strings.Join(out, ",")
	}
	before := a.Sorted(config.ServiceEntry, "")
	if got, want := names(before), "a/z,b/x,b/y,c/w"; got != want {
		t.Fatalf("Sorted = %s, want %s", got, want)
	}
	for ns, want := range map[string]string{"a": "a/z", "b": "b/x,b/y", "c": "c/w", "bb": "", "0": "", "z": ""} {
		if got := names(a.Sorted(config.ServiceEntry, ns)); got != want {
			t.Errorf("Sorted(%q) = %s, want %s", ns, got, want)
		}
	}
	if got := names(a.Sorted(config.DestinationRule, "")); got != "" {
		t.Errorf("Sorted(DestinationRule) = %s", got)
	}
	two.Update([]config.Config{se("b", "x", "2"), se("b", "v", "2")}, nil)
	one.Update(nil, []config.Key{{Kind: config.ServiceEntry, Namespace: "c", Name: "w"}})
	if got, want := names(before), "a/z,b/x,b/y,c/w"; got != want {
		t.Errorf("the earlier view changed: %s, want %s", got, want)
	}
	if got, want := names(a.Sorted(config.ServiceEntry, "")), "a/z,b/v,b/x,b/y"; got != want {
		t.Errorf("after the change Sorted = %s, want %s", got, want)
	}
	if c := a.Sorted(config.ServiceEntry, "b")[1]; host(*c) != "1" {
		t.Errorf("b/x from %s, want the winner one", host(*c))
	}
	if cs := a.Conflicts(); len(cs) != 1 || cs[0].Key.Name != "x" || cs[0].Winner != "one" {
		t.Errorf("conflicts %+v, want b/x won by one", cs)
	}
	two.Update(nil, []config.Key{{Kind: config.ServiceEntry, Namespace: "b", Name: "x"}})
	if cs := a.Conflicts(); len(cs) != 0 {
		t.Errorf("conflicts after two let go: %+v", cs)
	}
}
