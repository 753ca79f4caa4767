package dryrun

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// Markers of a whole list element added or removed (FieldChange.New,
// FieldChange.Old).
const (
	Added   = "(added)"
	Removed = "(removed)"
)

// FieldChange is one leaf field that differs between two versions of a
// resource. Old or New is empty when the field is absent on that side;
// values are JSON text.
type FieldChange struct {
	Path string `json:"path"`
	Old  string `json:"old,omitempty"`
	New  string `json:"new,omitempty"`
}

// Fields compares two resources field by field, over their protobuf
// JSON. Paths name list elements by their "name" field where they have
// one (virtualHosts[name=reviews:9080].routes[0]...), so an insertion
// does not show as every later element changing.
//
// A list element present on one side only is one change, "(added)" or
// "(removed)", not one per field inside it.
func Fields(before, after proto.Message) ([]FieldChange, error) {
	a, err := flatJSON(before)
	if err != nil {
		return nil, err
	}
	b, err := flatJSON(after)
	if err != nil {
		return nil, err
	}
	return diffFlat(a, b), nil
}

// flat is a resource's leaves by path, and the paths of its list elements.
type flat struct {
	leaves map[string]string
	elems  map[string]bool
}

func flatJSON(m proto.Message) (flat, error) {
	j, err := protojson.Marshal(m)
	if err != nil {
		return flat{}, err
	}
	var v any
	if err := json.Unmarshal(j, &v); err != nil {
		return flat{}, err
	}
	out := flat{leaves: map[string]string{}, elems: map[string]bool{}}
	flatten("", v, out)
	return out, nil
}

// flatten writes every leaf of v under its path.
func flatten(prefix string, v any, f flat) {
	out := f.leaves
	switch x := v.(type) {
	case map[string]any:
		if len(x) == 0 {
			out[prefix] = "{}"
		}
		for k, e := range x {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			flatten(p, e, f)
		}
	case []any:
		if len(x) == 0 {
			out[prefix] = "[]"
		}
		named := true
		seen := map[string]bool{}
		for _, e := range x {
			m, ok := e.(map[string]any)
			n, _ := m["name"].(string)
			if !ok || n == "" || seen[n] {
				named = false
				break
			}
			seen[n] = true
		}
		for i, e := range x {
			p := fmt.Sprintf("%s[%d]", prefix, i)
			if named {
				p = fmt.Sprintf("%s[name=%s]", prefix, e.(map[string]any)["name"])
			}
			f.elems[p] = true
			flatten(p, e, f)
		}
	default:
		b, _ := json.Marshal(x)
		out[prefix] = string(b)
	}
}

func diffFlat(a, b flat) []FieldChange {
	var out []FieldChange
	// whole is the outermost elements present on one side only.
	var whole []string
	for _, side := range []struct {
		mine, other flat
		added       bool
	}{{a, b, false}, {b, a, true}} {
		for e := range side.mine.elems {
			if !side.other.elems[e] && !insideAny(e, side.mine.elems, side.other.elems) {
				whole = append(whole, e)
				if side.added {
					out = append(out, FieldChange{Path: e, New: Added})
				} else {
					out = append(out, FieldChange{Path: e, Old: Removed})
				}
			}
		}
	}
	keys := map[string]bool{}
	for k := range a.leaves {
		keys[k] = true
	}
	for k := range b.leaves {
		keys[k] = true
	}
	for k := range keys {
		if a.leaves[k] != b.leaves[k] && !under(k, whole) {
			out = append(out, FieldChange{Path: k, Old: a.leaves[k], New: b.leaves[k]})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// String is "path: old -> new" (absent sides shown as "(none)").
func (f FieldChange) String() string {
	show := func(s string) string {
		if s == "" {
			return "(none)"
		}
		return s
	}
	return strings.TrimSpace(fmt.Sprintf("%s: %s -> %s", f.Path, show(f.Old), show(f.New)))
}

// insideAny: e is nested in an element that mine has and other lacks (so
// the outer one is reported instead).
func insideAny(e string, mine, other map[string]bool) bool {
	for p := range mine {
		if p != e && !other[p] && strings.HasPrefix(e, p+".") {
			return true
		}
	}
	return false
}

// under: path k is inside one of the elements.
func under(k string, elems []string) bool {
	for _, e := range elems {
		if k == e || strings.HasPrefix(k, e+".") || strings.HasPrefix(k, e+"[") {
			return true
		}
	}
	return false
}
