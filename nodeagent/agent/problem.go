package agent

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Problem is one thing wrong in a configuration file, where it is.
type Problem struct {
	File  string // the file's name as given to Parse
	Line  int    // 1-based; 0 when unknown
	Field string // YAML path, e.g. capture.inboundPortsExclude[1]; "" when none applies
	Msg   string
}

// String reads "FILE:LINE: FIELD: MSG", leaving out what is unknown.
func (p Problem) String() string {
	var b strings.Builder
	if p.File != "" {
		b.WriteString(p.File)
		if p.Line > 0 {
			fmt.Fprintf(&b, ":%d", p.Line)
		}
		b.WriteString(": ")
	} else if p.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", p.Line)
	}
	if p.Field != "" {
		b.WriteString(p.Field + ": ")
	}
	b.WriteString(p.Msg)
	return b.String()
}

// ConfigError lists every problem of a configuration. It matches
// ErrConfig with errors.Is. Problems are permanent until the file is
// edited: retrying the same file gives the same error.
type ConfigError struct {
	Problems []Problem
}

func (e *ConfigError) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.String()
	}
	return ErrConfig.Error() + ": " + strings.Join(parts, "; ")
}

// Is makes errors.Is(err, ErrConfig) true.
func (e *ConfigError) Is(target error) bool { return target == ErrConfig }

// fieldProblems turns the error of a nested Validate (iptables' or
// tunnel's: errors.Join of messages reading "PREFIXFIELD: REASON") into
// problems under section.
func fieldProblems(section string, err error, prefix string) []Problem {
	if err == nil {
		return nil
	}
	var out []Problem
	// errors.Join puts one error per line; the single errors may wrap
	// several (%w twice), so the text is what tells them apart.
	for _, msg := range strings.Split(err.Error(), "\n") {
		msg = strings.TrimPrefix(msg, prefix)
		field, reason, ok := strings.Cut(msg, ": ")
		if !ok || strings.ContainsAny(field, " \"") {
			out = append(out, Problem{Field: section, Msg: msg})
			continue
		}
		out = append(out, Problem{Field: section + "." + field, Msg: reason})
	}
	return out
}

// yamlLine matches the "line N: " that yaml.v3 puts in its messages.
var yamlLine = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)

// unknownField matches yaml.v3's KnownFields complaint.
var unknownField = regexp.MustCompile(`^field (\S+) not found in type`)

// decodeProblems turns a yaml.v3 decoding error into problems with the
// line and, where the document can tell, the field.
func decodeProblems(name string, data []byte, err error) []Problem {
	var msgs []string
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msgs = te.Errors
	} else {
		msgs = []string{err.Error()}
	}
	var pos *positions
	var out []Problem
	for _, m := range msgs {
		p := Problem{File: name, Msg: "not valid agent YAML: " + m}
		if sm := yamlLine.FindStringSubmatch(m); sm != nil {
			p.Line, _ = strconv.Atoi(sm[1])
			p.Msg = "not valid agent YAML: " + sm[2]
			if te != nil {
				if pos == nil {
					pos = indexPositions(data)
				}
				key := ""
				if km := unknownField.FindStringSubmatch(sm[2]); km != nil {
					key = km[1]
				}
				p.Field = pos.fieldAt(p.Line, key)
			}
		}
		out = append(out, p)
	}
	return out
}

// positions is where each field of a YAML document is: paths in the
// agent's spelling ("capture.inboundPortsExclude[1]") and their lines.
type positions struct {
	line   map[string]int
	leaves map[int][]string // line -> paths of scalar values on it
	keys   map[int][]string // line -> paths of mapping keys on it
}

// indexPositions parses data as a YAML node tree; a document that does
// not parse gives empty positions.
func indexPositions(data []byte) *positions {
	p := &positions{line: map[string]int{}, leaves: map[int][]string{}, keys: map[int][]string{}}
	var doc yaml.Node
	if yaml.Unmarshal(data, &doc) != nil {
		return p
	}
	p.walk(&doc, "", 0)
	return p
}

func (p *positions) walk(n *yaml.Node, path string, depth int) {
	if n == nil || depth > 64 { // aliases are not followed; depth is a guard
		return
	}
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			p.walk(c, path, depth+1)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			sub := k.Value
			if path != "" {
				sub = path + "." + k.Value
			}
			p.line[sub] = k.Line
			p.keys[k.Line] = append(p.keys[k.Line], sub)
			if v.Kind == yaml.ScalarNode {
				p.leaves[v.Line] = append(p.leaves[v.Line], sub)
			}
			p.walk(v, sub, depth+1)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			sub := fmt.Sprintf("%s[%d]", path, i)
			p.line[sub] = c.Line
			if c.Kind == yaml.ScalarNode {
				p.leaves[c.Line] = append(p.leaves[c.Line], sub)
			}
			p.walk(c, sub, depth+1)
		}
	}
}

// fieldAt names the field a decoding error at line is about: the key
// named key on that line, or else the only scalar value on it.
func (p *positions) fieldAt(line int, key string) string {
	if key != "" {
		for _, path := range p.keys[line] {
			if path == key || strings.HasSuffix(path, "."+key) {
				return path
			}
		}
	}
	if l := p.leaves[line]; len(l) == 1 {
		return l[0]
	}
	return ""
}

// lineOf is the line of field, or of its closest ancestor in the file
// (a required field that is missing is reported at its section). A
// field naming alternatives ("tunnel.mark/proxyMark") takes the first
// one present.
func (p *positions) lineOf(field string) int {
	alts := alternatives(field)
	for _, f := range alts {
		if l, ok := p.line[f]; ok {
			return l
		}
	}
	for f := parent(alts[0]); f != ""; f = parent(f) {
		if l, ok := p.line[f]; ok {
			return l
		}
	}
	return 0
}

// alternatives expands "tunnel.mark/proxyMark" to tunnel.mark and
// tunnel.proxyMark.
func alternatives(field string) []string {
	dir, last := "", field
	if i := strings.LastIndexByte(field, '.'); i >= 0 {
		dir, last = field[:i+1], field[i+1:]
	}
	var out []string
	for _, a := range strings.Split(last, "/") {
		out = append(out, dir+a)
	}
	return out
}

// parent is the path one level up: a[1] -> a, a.b -> a, a -> "".
func parent(path string) string {
	if strings.HasSuffix(path, "]") {
		if i := strings.LastIndexByte(path, '['); i > 0 {
			return path[:i]
		}
	}
	if i := strings.LastIndexByte(path, '.'); i >= 0 {
		return path[:i]
	}
	return ""
}
