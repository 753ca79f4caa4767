package parity

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// Absent stands for a side that lacks a field or resource.
const Absent = "<absent>"

// Difference is one field (or whole resource) that differs between istiod
// and baremesh for one proxy.
type Difference struct {
	// Path is "type/resource" for a resource one side lacks, else
	// "type/resource/field.path" with list elements keyed by name
	// ([name=X]), by filter_chain_match ([match={...}]) or by index.
	Path string
	// Istiod and Ours are compact JSON of each side's value, or Absent.
	Istiod, Ours string
}

func (d Difference) String() string {
	return fmt.Sprintf("%s: istiod %s, ours %s", d.Path, d.Istiod, d.Ours)
}

// DiffResources compares what istiod and baremesh sent one proxy, type by
// type and resource by resource (by name), and returns the differences
// sorted by path and the number of resources compared (the union of names).
func DiffResources(istiod, ours map[string]map[string]Tree) (diffs []Difference, compared, equal int) {
	for _, typ := range Types {
		a, b := istiod[typ], ours[typ]
		for _, name := range unionKeys(a, b) {
			compared++
			ta, inA := a[name]
			tb, inB := b[name]
			prefix := typ + "/" + name
			switch {
			case !inA:
				diffs = append(diffs, Difference{Path: prefix, Istiod: Absent, Ours: summary(tb)})
			case !inB:
				diffs = append(diffs, Difference{Path: prefix, Istiod: summary(ta), Ours: Absent})
			default:
				n := len(diffs)
				diffs = diffTree(diffs, prefix+"/", ta, tb)
				if len(diffs) == n {
					equal++
				}
			}
		}
	}
	sort.SliceStable(diffs, func(i, j int) bool { return diffs[i].Path < diffs[j].Path })
	return diffs, compared, equal
}

func unionKeys[V any](a, b map[string]V) []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range []map[string]V{a, b} {
		for k := range m {
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	sort.Strings(out)
	return out
}

// diffTree appends the differences between a and b at path.
func diffTree(out []Difference, path string, a, b any) []Difference {
	switch va := a.(type) {
	case map[string]any:
		vb, ok := b.(map[string]any)
		if !ok {
			break
		}
		for _, k := range unionKeys(va, vb) {
			ca, inA := va[k]
			cb, inB := vb[k]
			p := join(path, k)
			switch {
			case !inA:
				out = append(out, Difference{Path: p, Istiod: Absent, Ours: summary(cb)})
			case !inB:
				out = append(out, Difference{Path: p, Istiod: summary(ca), Ours: Absent})
			default:
				out = diffTree(out, p, ca, cb)
			}
		}
		return out
	case []any:
		vb, ok := b.([]any)
		if !ok {
			break
		}
		ka, kb := listKeys(va), listKeys(vb)
		if ka == nil || kb == nil {
			for i := 0; i < max(len(va), len(vb)); i++ {
				p := fmt.Sprintf("%s[%d]", path, i)
				switch {
				case i >= len(va):
					out = append(out, Difference{Path: p, Istiod: Absent, Ours: summary(vb[i])})
				case i >= len(vb):
					out = append(out, Difference{Path: p, Istiod: summary(va[i]), Ours: Absent})
				default:
					out = diffTree(out, p, va[i], vb[i])
				}
			}
			return out
		}
		ma, mb := map[string]any{}, map[string]any{}
		for i, k := range ka {
			ma[k] = va[i]
		}
		for i, k := range kb {
			mb[k] = vb[i]
		}
		for _, k := range unionKeys(ma, mb) {
			p := path + "[" + k + "]"
			ca, inA := ma[k]
			cb, inB := mb[k]
			switch {
			case !inA:
				out = append(out, Difference{Path: p, Istiod: Absent, Ours: summary(cb)})
			case !inB:
				out = append(out, Difference{Path: p, Istiod: summary(ca), Ours: Absent})
			default:
				out = diffTree(out, p, ca, cb)
			}
		}
		return out
	default:
		if equalJSON(a, b) {
			return out
		}
	}
	if equalJSON(a, b) {
		return out
	}
	return append(out, Difference{Path: strings.TrimSuffix(path, "/"), Istiod: summary(a), Ours: summary(b)})
}

func join(path, k string) string {
	if strings.HasSuffix(path, "/") {
		return path + k
	}
	return path + "." + k
}

// listKeys keys list elements by a stable key, or returns nil when the
// list has none (then elements are matched by index): "name=X" when every
// element is an object with a distinct name, "match={...}" when every
// element is a filter chain with a distinct filter_chain_match (none keys
// as "match={}"), EDS locality groups by locality and priority, EDS
// endpoints by address, and a list of distinct strings as a set ("=s").
func listKeys(l []any) []string {
	if len(l) == 0 {
		return nil
	}
	for _, field := range []string{"name", "filter_chain_match", "locality", "endpoint", "value"} {
		keys := make([]string, 0, len(l))
		seen := map[string]bool{}
		for _, e := range l {
			k, ok := elementKey(field, e)
			if !ok || seen[k] {
				keys = nil
				break
			}
			seen[k] = true
			keys = append(keys, k)
		}
		if keys != nil {
			return keys
		}
	}
	return nil
}

// elementKey is e's key by one rule of listKeys.
func elementKey(field string, e any) (string, bool) {
	if field == "value" { // a list of strings: a set
		s, ok := e.(string)
		return "=" + s, ok
	}
	m, ok := e.(map[string]any)
	if !ok {
		return "", false
	}
	switch field {
	case "name":
		s, ok := m["name"].(string)
		return "name=" + s, ok
	case "filter_chain_match":
		_, chain := m["filters"]
		return "match=" + compact(m["filter_chain_match"]), chain
	case "locality": // EDS locality groups
		if _, ok := m["lb_endpoints"]; !ok {
			return "", false
		}
		return fmt.Sprintf("locality=%s,priority=%v", compact(m["locality"]), m["priority"]), true
	default: // EDS endpoints, by address
		ep, ok := m["endpoint"].(map[string]any)
		if !ok {
			return "", false
		}
		return "endpoint=" + compact(ep["address"]), true
	}
}

func equalJSON(a, b any) bool { return compact(a) == compact(b) }

// compact is canonical JSON (encoding/json sorts map keys).
func compact(v any) string {
	if v == nil {
		return "{}"
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// summary is compact JSON, shortened for reports.
func summary(v any) string {
	s := compact(v)
	if len(s) > 240 {
		s = s[:240] + "…"
	}
	return s
}
