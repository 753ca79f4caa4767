package file

import "bytes"

// The fast path of ParseLimits (issue #30: yaml.v3's parse into
// yaml.Node was half of a one-resource file's CPU, and reading 100,000
// files took minutes on a busy machine). fastDocs reads the plain YAML
// that config files are — block mappings and sequences indented with
// spaces, one-line flow collections, plain, single- and double-quoted
// scalars without escapes, comments, "---" between documents, in
// printable ASCII — straight into the JSON documents nodeJSON would
// write from yaml.v3's nodes, with the line of each root mapping. For
// anything else it says no and the caller takes yaml.v3's path, which
// decides it (and words every error) as before: tabs, CR, non-ASCII or
// control bytes, anchors, aliases, tags, block scalars, explicit keys,
// directives, multi-line scalars or flow collections, escapes, keys
// that are not plain strings, duplicate keys, merge keys, every plain
// scalar yaml.v3 would type other than as a string, a JSON number, true,
// false or null, a root that is not a mapping, a List (items), and
// documents or nodes past the Limits. TestFastYAMLAgreesWithYAMLv3 and
// FuzzFastYAML check that whatever it reads, yaml.v3 and nodeJSON read
// the same.

// fastDoc is one document: its JSON and the line of its root mapping.
type fastDoc struct {
	json []byte
	line int
}

type fastLine struct {
	no     int    // 1-based
	indent int    // leading spaces
	text   []byte // after the indentation; never empty
}

type fastParser struct {
	lines    []fastLine
	i, end   int // the current line; the end of the document's lines
	out      []byte
	nodes    int
	maxNodes int
	ok       bool
}

// fastDocs returns the documents of data, or ok false when data is not
// the plain YAML it reads (see above).
func fastDocs(data []byte, lim Limits) (docs []fastDoc, ok bool) {
	for _, c := range data {
		if (c < 0x20 && c != '\n') || c >= 0x7f {
			return nil, false
		}
	}
	// Half the node limit: this path counts nodes its own way, and a
	// resource near the limit takes yaml.v3's path, which decides.
	p := &fastParser{maxNodes: lim.MaxNodes / 2, ok: true}
	var starts []int // the index in lines where each document starts
	starts = append(starts, 0)
	no := 0
	for len(data) > 0 {
		no++
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		ind := 0
		for ind < len(line) && line[ind] == ' ' {
			ind++
		}
		text := bytes.TrimRight(line[ind:], " ")
		if len(text) == 0 || text[0] == '#' {
			continue
		}
		if ind == 0 && (text[0] == '%' || bytes.HasPrefix(text, []byte("..."))) {
			return nil, false // directives, document end markers
		}
		if ind == 0 && bytes.HasPrefix(text, []byte("---")) {
			if len(text) > 3 && !(text[3] == ' ' && bytes.TrimLeft(text[3:], " ")[0] == '#') {
				return nil, false // content on the marker's line
			}
			starts = append(starts, len(p.lines))
			continue
		}
		p.lines = append(p.lines, fastLine{no: no, indent: ind, text: text})
	}
	starts = append(starts, len(p.lines))
	if len(starts)-1 > lim.MaxDocuments {
		return nil, false
	}
	for d := 0; d+1 < len(starts); d++ {
		p.i, p.end = starts[d], starts[d+1]
		if p.i == p.end {
			continue // an empty document
		}
		first := p.lines[p.i]
		if isSeqItem(first.text) {
			return nil, false // the root must be a mapping
		}
		if _, _, isKey := splitKey(first.text); !isKey {
			return nil, false
		}
		p.out, p.nodes = make([]byte, 0, 512), 0
		p.block(first.indent)
		if !p.ok || p.i != p.end {
			return nil, false
		}
		if hasRootKey(p.lines[starts[d]:p.end], first.indent, "items") {
			return nil, false // a List: ParseLimits reads it item by item
		}
		docs = append(docs, fastDoc{json: p.out, line: first.no})
	}
	if len(docs) > lim.MaxDocuments {
		return nil, false
	}
	return docs, true
}

// hasRootKey reports whether the root mapping (at indent) has key.
func hasRootKey(lines []fastLine, indent int, key string) bool {
	for _, l := range lines {
		if l.indent == indent {
			if k, _, ok := splitKey(l.text); ok && k == key {
				return true
			}
		}
	}
	return false
}

func (p *fastParser) fail() { p.ok = false }

func (p *fastParser) node() bool {
	if p.nodes++; p.nodes > p.maxNodes {
		p.fail()
	}
	return p.ok
}

// block reads the mapping or sequence whose first line is the current
// one, at indent.
func (p *fastParser) block(indent int) {
	if isSeqItem(p.lines[p.i].text) {
		p.seq(indent)
	} else {
		p.mapping(indent)
	}
}

func isSeqItem(text []byte) bool { return text[0] == '-' && (len(text) == 1 || text[1] == ' ') }

func (p *fastParser) mapping(indent int) {
	if !p.node() {
		return
	}
	p.out = append(p.out, '{')
	var seen []string
	for n := 0; p.ok && p.i < p.end && p.lines[p.i].indent == indent && !isSeqItem(p.lines[p.i].text); n++ {
		key, rest, ok := splitKey(p.lines[p.i].text)
		if !ok || key == "<<" {
			p.fail()
			return
		}
		if !newKey(seen, key) {
			p.fail() // a duplicate key, or too many to compare
			return
		}
		seen = append(seen, key)
		if n > 0 {
			p.out = append(p.out, ',')
		}
		p.out = append(appendString(p.out, key), ':')
		if !p.node() {
			return
		}
		p.i++
		if len(rest) > 0 {
			p.inline(rest)
			if p.i < p.end && p.lines[p.i].indent > indent {
				p.fail() // a scalar that goes on, or a stray line
			}
			continue
		}
		switch {
		case p.i < p.end && p.lines[p.i].indent > indent:
			p.block(p.lines[p.i].indent)
		case p.i < p.end && p.lines[p.i].indent == indent && isSeqItem(p.lines[p.i].text):
			p.seq(indent)
		default:
			p.node()
			p.out = append(p.out, "null"...)
		}
		if p.i < p.end && p.lines[p.i].indent > indent {
			p.fail()
		}
	}
	if p.i < p.end && p.lines[p.i].indent == indent {
		p.fail() // a sequence item among keys
	}
	p.out = append(p.out, '}')
}

func (p *fastParser) seq(indent int) {
	if !p.node() {
		return
	}
	p.out = append(p.out, '[')
	for n := 0; p.ok && p.i < p.end && p.lines[p.i].indent == indent && isSeqItem(p.lines[p.i].text); n++ {
		if n > 0 {
			p.out = append(p.out, ',')
		}
		l := &p.lines[p.i]
		rest := bytes.TrimLeft(l.text[1:], " ")
		col := indent + len(l.text) - len(rest)
		switch {
		case len(rest) == 0 || rest[0] == '#':
			p.i++
			if p.i < p.end && p.lines[p.i].indent > indent {
				p.block(p.lines[p.i].indent)
			} else {
				p.node()
				p.out = append(p.out, "null"...)
			}
		case isSeqItem(rest):
			p.fail() // "- - a"
			return
		default:
			if _, _, isKey := splitKey(rest); isKey {
				// A mapping that starts on the item's line: read it as
				// if its first key stood on a line of its own.
				l.indent, l.text = col, rest
				p.mapping(col)
			} else {
				p.i++
				p.inline(rest)
			}
		}
		if p.i < p.end && p.lines[p.i].indent > indent {
			p.fail()
		}
	}
	p.out = append(p.out, ']')
}

// inline reads a value that is the rest of a line: a one-line flow
// collection or a scalar, then at most a comment.
func (p *fastParser) inline(s []byte) {
	var n int
	switch s[0] {
	case '[', '{':
		n = p.flow(s, 0)
	case '"', '\'':
		var v string
		v, n = quoted(s, 0)
		if n < 0 {
			p.fail()
			return
		}
		p.node()
		p.out = appendString(p.out, v)
	default:
		end := len(s)
		if i := bytes.Index(s, []byte(" #")); i >= 0 {
			end = i
		}
		v := bytes.TrimRight(s[:end], " ")
		if bytes.Contains(v, []byte(": ")) || v[len(v)-1] == ':' {
			p.fail() // a mapping where a scalar must be
			return
		}
		p.plain(v)
		n = end
	}
	if !p.ok {
		return
	}
	rest := bytes.TrimLeft(s[n:], " ")
	if len(rest) > 0 && (rest[0] != '#' || n == len(s)-len(rest)) {
		p.fail() // more on the line, or a comment not after a space
	}
}

// flow reads the flow collection at s[i] and returns the index after it.
// It must close on the line.
func (p *fastParser) flow(s []byte, i int) int {
	if !p.node() {
		return len(s)
	}
	open, close := s[i], byte(']')
	if open == '{' {
		close = '}'
	}
	p.out = append(p.out, open)
	i = skipSpaces(s, i+1)
	if i < len(s) && s[i] == close {
		p.out = append(p.out, close)
		return i + 1
	}
	var seen []string
	for n := 0; p.ok; n++ {
		if n > 0 {
			p.out = append(p.out, ',')
		}
		if open == '{' {
			var key string
			key, i = p.flowKey(s, i)
			if !p.ok {
				return len(s)
			}
			if !newKey(seen, key) {
				p.fail()
				return len(s)
			}
			seen = append(seen, key)
			p.node()
			p.out = append(appendString(p.out, key), ':')
		}
		i = p.flowItem(s, i)
		if !p.ok {
			return len(s)
		}
		i = skipSpaces(s, i)
		switch {
		case i < len(s) && s[i] == close:
			p.out = append(p.out, close)
			return i + 1
		case i < len(s) && s[i] == ',':
			i = skipSpaces(s, i+1)
			if i >= len(s) || s[i] == close || s[i] == ',' {
				p.fail() // trailing or empty entries; or the line ended
			}
		default:
			p.fail()
		}
	}
	return len(s)
}

// flowKey reads "key: " in a flow mapping.
func (p *fastParser) flowKey(s []byte, i int) (string, int) {
	var key string
	if i < len(s) && (s[i] == '"' || s[i] == '\'') {
		key, i = quoted(s, i)
		if i < 0 {
			p.fail()
			return "", len(s)
		}
	} else {
		j := i
		for j < len(s) && s[j] != ':' && s[j] != ',' && s[j] != '}' {
			j++
		}
		key = string(bytes.TrimRight(s[i:j], " "))
		if !plainKey(key) {
			p.fail()
			return "", len(s)
		}
		i = j
	}
	if i+1 >= len(s) || s[i] != ':' || s[i+1] != ' ' {
		p.fail()
		return "", len(s)
	}
	return key, skipSpaces(s, i+1)
}

// flowItem reads one value inside a flow collection.
func (p *fastParser) flowItem(s []byte, i int) int {
	if i >= len(s) {
		p.fail()
		return len(s)
	}
	switch s[i] {
	case '[', '{':
		return p.flow(s, i)
	case '"', '\'':
		v, n := quoted(s, i)
		if n < 0 {
			p.fail()
			return len(s)
		}
		p.node()
		p.out = appendString(p.out, v)
		return n
	}
	j := i
	for j < len(s) && s[j] != ',' && s[j] != ']' && s[j] != '}' {
		switch s[j] {
		case ':', '#', '[', '{':
			p.fail() // a pair, a comment or a collection inside a scalar
			return len(s)
		}
		j++
	}
	v := bytes.TrimRight(s[i:j], " ")
	if len(v) == 0 {
		p.fail()
		return len(s)
	}
	p.plain(v)
	return j
}
