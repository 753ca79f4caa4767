package file

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"github.com/baremesh/baremesh/core/config"
)

// maxReported bounds the problems reported for one file; the file is
// rejected whole anyway, and a person fixes the first ones first.
const maxReported = 100

// Parse is ParseLimits with the default Limits.
func Parse(data []byte, path, source string) ([]config.Config, []*config.DocError) {
	return ParseLimits(data, path, source, Limits{})
}

// ParseLimits decodes every document in data (YAML, multi-document, or
// JSON; a kubectl List or <Kind>List is read item by item) and types and
// validates it. It returns the configs of the resources that are good and
// one DocError per bad one, each naming path and the line of the field at
// fault when it is known, else of the resource. A file is all-or-nothing
// for the watcher, but ParseLimits reports every problem (up to 100) so a
// person can fix them in one go. source names the source instance in each
// Config's Source. The cost is bounded by lim: a file over MaxDocuments
// resources, or a resource over MaxNodes YAML nodes, is rejected before
// any typed decoding.
func ParseLimits(data []byte, path, source string, lim Limits) ([]config.Config, []*config.DocError) {
	if i := bytes.IndexByte(data, 0); i >= 0 {
		return nil, []*config.DocError{{File: path, Line: 1 + bytes.Count(data[:i], []byte{'\n'}),
			Err: fmt.Errorf("%w: binary data (NUL byte at offset %d), not YAML or JSON", config.ErrParse, i)}}
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, []*config.DocError{{File: path, Err: fmt.Errorf("%w: file is empty; delete it to remove its resources", config.ErrParse)}}
	}
	if e := checkUTF8(data, path); e != nil {
		return nil, []*config.DocError{e}
	}
	lim = lim.WithDefaults()
	if cfgs, ok := parseFast(data, path, source, lim); ok {
		return cfgs, nil
	}
	p := &parser{path: path, source: source, lim: lim, seen: map[config.Key]int{}}
	p.aliasBudget = p.lim.MaxNodes
	dec := yaml.NewDecoder(bytes.NewReader(data))
	start := 1
	for !p.stop {
		var node yaml.Node
		err := dec.Decode(&node)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			// The decoder cannot resume after a syntax error.
			p.fail(yamlErrorLine(err, start), "", fmt.Errorf("%w: %s", config.ErrParse, cleanYAMLError(err)))
			break
		}
		line := docLine(&node)
		start = line
		if isEmptyDoc(&node) {
			continue
		}
		root := node.Content[0]
		if root.Kind != yaml.MappingNode {
			p.count(line)
			p.fail(line, "", fmt.Errorf("%w: document is not a mapping of apiVersion, kind, metadata and spec", config.ErrParse))
			continue
		}
		if items, apiVersion, kind, ok := listOf(root); ok {
			p.list(root, items, apiVersion, kind)
			continue
		}
		p.resource(root, "", "")
	}
	if p.dropped > 0 {
		p.errs = append(p.errs, &config.DocError{File: path, Err: fmt.Errorf("%w: %d more problems not shown", config.ErrParse, p.dropped)})
	}
	return p.out, p.errs
}

// parseFast is ParseLimits for a file of plain YAML (fastDocs) whose
// every resource is good. Anything else (other YAML, any problem) gives
// ok false, and yaml.v3's path reads the file and words its problems.
func parseFast(data []byte, path, source string, lim Limits) (cfgs []config.Config, ok bool) {
	docs, ok := fastDocs(data, lim)
	if !ok {
		return nil, false
	}
	var seen map[config.Key]bool
	for _, d := range docs {
		c, err := config.TypedJSON(d.json, config.Source{Name: source, File: path, Line: d.line})
		if err != nil {
			return nil, false
		}
		if len(docs) > 1 {
			if seen == nil {
				seen = make(map[config.Key]bool, len(docs))
			}
			if seen[c.Key()] {
				return nil, false
			}
			seen[c.Key()] = true
		}
		cfgs = append(cfgs, c)
	}
	return cfgs, true
}

type parser struct {
	path, source string
	lim          Limits
	out          []config.Config
	errs         []*config.DocError
	dropped      int
	seen         map[config.Key]int
	resources    int
	aliasBudget  int // nodes reached through aliases the file may still count
	stop         bool
}

func (p *parser) fail(line int, resource string, err error) {
	if len(p.errs) >= maxReported {
		p.dropped++
		return
	}
	p.errs = append(p.errs, &config.DocError{File: p.path, Line: line, Resource: resource, Err: err})
}

// count counts one resource against MaxDocuments; past it, the rest of
// the file is not read.
func (p *parser) count(line int) bool {
	if p.resources++; p.resources > p.lim.MaxDocuments {
		p.fail(line, "", fmt.Errorf("%w: more than %d resources in one file (maxDocuments); the rest of the file is not read", config.ErrParse, p.lim.MaxDocuments))
		p.stop = true
		return false
	}
	return true
}

// resource types one resource node. apiVersion and kind, when set, are
// what a <Kind>List gives its items that do not say.
func (p *parser) resource(n *yaml.Node, apiVersion, kind string) {
	line := n.Line
	if !p.count(line) {
		return
	}
	if c := countNodes(n, p.lim.MaxNodes+1, &p.aliasBudget); c > p.lim.MaxNodes {
		p.fail(line, "", fmt.Errorf("%w: resource has more than %d YAML nodes (maxNodes), or its aliases expand past that", config.ErrParse, p.lim.MaxNodes))
		return
	}
	src := config.Source{Name: p.source, File: p.path, Line: line}
	if doc, ok := nodeJSON(n, apiVersion, kind); ok {
		c, err := config.TypedJSON(doc, src)
		if err == nil {
			p.add(c, line)
			return
		}
		// Errors are reported by the generic path, which names the
		// resource from its map.
	}
	var raw map[string]any
	if err := n.Decode(&raw); err != nil {
		p.fail(yamlErrorLine(err, line), "", fmt.Errorf("%w: %s", config.ErrParse, cleanYAMLError(err)))
		return
	}
	if _, ok := raw["apiVersion"]; !ok && apiVersion != "" {
		raw["apiVersion"] = apiVersion
	}
	if _, ok := raw["kind"]; !ok && kind != "" {
		raw["kind"] = kind
	}
	c, err := config.Typed(raw, src)
	if err != nil {
		p.fail(fieldLine(n, err), resourceName(raw), err)
		return
	}
	p.add(c, line)
}

// add keeps one typed resource, unless the file defined its key before.
func (p *parser) add(c config.Config, line int) {
	if prev, dup := p.seen[c.Key()]; dup {
		p.fail(line, c.Key().String(), fmt.Errorf("%w: duplicate: the same kind, namespace and name is defined at line %d of this file", config.ErrInvalid, prev))
		return
	}
	p.seen[c.Key()] = line
	p.out = append(p.out, c)
}

// list reads the items of a kubectl List or <Kind>List, each a resource
// located by its own line.
func (p *parser) list(root, items *yaml.Node, apiVersion, kind string) {
	if items.Kind != yaml.SequenceNode {
		p.count(root.Line)
		p.fail(items.Line, "", fmt.Errorf("%w: items of a %s must be a list of resources", config.ErrParse, kind))
		return
	}
	itemAPI, itemKind := "", ""
	if kind != "List" {
		itemAPI, itemKind = apiVersion, strings.TrimSuffix(kind, "List")
	}
	for _, it := range items.Content {
		if p.stop {
			return
		}
		if it.Kind != yaml.MappingNode {
			p.count(it.Line)
			p.fail(it.Line, "", fmt.Errorf("%w: an item of a %s is not a mapping of apiVersion, kind, metadata and spec", config.ErrParse, kind))
			continue
		}
		p.resource(it, itemAPI, itemKind)
	}
}

// listOf recognises kubectl's "kind: List" (any apiVersion, items carry
// their own apiVersion and kind) and the API's "kind: <Kind>List" for a
// kind baremesh reads (items may leave both out).
func listOf(root *yaml.Node) (items *yaml.Node, apiVersion, kind string, ok bool) {
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		switch {
		case k.Value == "items":
			items = v
		case k.Value == "kind" && v.Kind == yaml.ScalarNode:
			kind = v.Value
		case k.Value == "apiVersion" && v.Kind == yaml.ScalarNode:
			apiVersion = v.Value
		}
	}
	if items == nil {
		return nil, "", "", false
	}
	if kind == "List" || (strings.HasSuffix(kind, "List") && config.SchemaFor(config.Kind(strings.TrimSuffix(kind, "List"))) != nil) {
		return items, apiVersion, kind, true
	}
	return nil, "", "", false
}

// countNodes counts the nodes of n up to limit, following aliases; what
// aliases reach is also taken from budget, shared by the whole file, so
// that counting stays in proportion to the bytes.
func countNodes(n *yaml.Node, limit int, budget *int) int {
	count := 0
	var walk func(n *yaml.Node, viaAlias bool) bool
	walk = func(n *yaml.Node, viaAlias bool) bool {
		if count++; count >= limit {
			return false
		}
		if viaAlias {
			if *budget--; *budget < 0 {
				count = limit
				return false
			}
		}
		if n.Kind == yaml.AliasNode && n.Alias != nil {
			return walk(n.Alias, true)
		}
		for _, c := range n.Content {
			if !walk(c, viaAlias) {
				return false
			}
		}
		return true
	}
	walk(n, false)
	return count
}

// checkUTF8 names the line and column of the first byte that is not
// UTF-8; yaml.v3 says only "invalid leading UTF-8 octet".
func checkUTF8(data []byte, path string) *config.DocError {
	if utf8.Valid(data) {
		return nil
	}
	line, lineStart := 1, 0
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && size <= 1 {
			col := utf8.RuneCount(data[lineStart:i]) + 1
			return &config.DocError{File: path, Line: line,
				Err: fmt.Errorf("%w: invalid UTF-8 (byte 0x%02x at line %d, column %d); config files must be UTF-8", config.ErrParse, data[i], line, col)}
		}
		if data[i] == '\n' {
			line++
			lineStart = i + 1
		}
		i += size
	}
	return nil
}

func docLine(n *yaml.Node) int {
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		return n.Content[0].Line
	}
	return n.Line
}

func isEmptyDoc(n *yaml.Node) bool {
	if n.Kind == yaml.DocumentNode {
		if len(n.Content) == 0 {
			return true
		}
		n = n.Content[0]
	}
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

func resourceName(raw map[string]any) string {
	kind, _ := raw["kind"].(string)
	md, _ := raw["metadata"].(map[string]any)
	name, _ := md["name"].(string)
	ns, _ := md["namespace"].(string)
	if kind == "" && name == "" {
		return ""
	}
	if ns == "" {
		ns = config.DefaultNamespace
	}
	return kind + "/" + ns + "/" + name
}

var yamlLineRE = regexp.MustCompile(`line (\d+)`)

// yamlErrorLine takes the line a yaml.v3 error names, else the start of
// the document being read.
func yamlErrorLine(err error, fallback int) int {
	if m := yamlLineRE.FindStringSubmatch(err.Error()); m != nil {
		if n, e := strconv.Atoi(m[1]); e == nil {
			return n
		}
	}
	return fallback
}

var yamlNoiseRE = regexp.MustCompile(`^yaml: (unmarshal errors:\s*)?(line \d+: )?`)

func cleanYAMLError(err error) string {
	return strings.TrimSpace(yamlNoiseRE.ReplaceAllString(err.Error(), ""))
}
