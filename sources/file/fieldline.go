package file

import (
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/baremesh/baremesh/core/config"
)

// fieldLine finds the line of the field a typing or validation error
// names in the resource node n: the path of the first field error
// ("spec.ports[0].number"), or the field protojson names ("unknown field
// \"frob\""), else n's own line.
func fieldLine(n *yaml.Node, err error) int {
	if fes := config.FieldErrors(err); len(fes) > 0 {
		return pathLine(n, fes[0].Field)
	}
	if m := protoFieldRE.FindStringSubmatch(err.Error()); m != nil {
		if spec := child(n, "spec"); spec != nil {
			if k := findKey(spec.value, m[1], 0); k != nil {
				return k.Line
			}
		}
	}
	return n.Line
}

var protoFieldRE = regexp.MustCompile(`(?:unknown field|field) "?([A-Za-z0-9_]+)"?`)

type entry struct{ key, value *yaml.Node }

// child returns the entry of mapping n whose key is name, comparing as
// protojson does (camelCase or snake_case).
func child(n *yaml.Node, name string) *entry {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	want := normName(name)
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == name || normName(n.Content[i].Value) == want {
			return &entry{n.Content[i], n.Content[i+1]}
		}
	}
	return nil
}

func normName(s string) string { return strings.ToLower(strings.ReplaceAll(s, "_", "")) }

// pathLine walks a field path ("spec.http[0].route[1].weight",
// "metadata.labels[app.kubernetes.io/name]") down n as far as it goes and
// returns the line of the deepest node found.
func pathLine(n *yaml.Node, path string) int {
	line := n.Line
	cur := n
	for _, seg := range splitPath(path) {
		var next *yaml.Node
		if e := child(cur, seg); e != nil {
			next, line = e.value, e.key.Line
		} else if i, err := strconv.Atoi(seg); err == nil {
			for cur.Kind == yaml.AliasNode && cur.Alias != nil {
				cur = cur.Alias
			}
			if cur.Kind == yaml.SequenceNode && i >= 0 && i < len(cur.Content) {
				next = cur.Content[i]
				line = next.Line
			}
		}
		if next == nil {
			break
		}
		cur = next
	}
	return line
}

// splitPath splits "a.b[0].c[x.y]" into a, b, 0, c, x.y.
func splitPath(p string) []string {
	var out []string
	for p != "" {
		switch p[0] {
		case '.':
			p = p[1:]
		case '[':
			end := strings.IndexByte(p, ']')
			if end < 0 {
				return append(out, p[1:])
			}
			out = append(out, p[1:end])
			p = p[end+1:]
		default:
			end := strings.IndexAny(p, ".[")
			if end < 0 {
				return append(out, p)
			}
			out = append(out, p[:end])
			p = p[end:]
		}
	}
	return out
}

// findKey returns the first key named name below n, depth first.
func findKey(n *yaml.Node, name string, depth int) *yaml.Node {
	if n == nil || depth > 100 {
		return nil
	}
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == name {
				return n.Content[i]
			}
		}
	}
	for _, c := range n.Content {
		if k := findKey(c, name, depth+1); k != nil {
			return k
		}
	}
	return nil
}
