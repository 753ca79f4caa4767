package file

import (
	"regexp"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// nodeJSON writes a resource's YAML node straight as the JSON document
// config.TypedJSON reads, instead of decoding it into a generic map and
// marshalling that (the map and its JSON were a third of a one-resource
// file's parse, issue #30). It handles the plain YAML that config files
// are: mappings with string keys, sequences, strings, JSON-shaped
// numbers, true/false and null. For anything else (aliases, merge keys,
// duplicate keys, other tags or number forms) ok is false and the caller
// takes the generic path, which decides those as before. apiVersion and
// kind, when set, are added if the mapping lacks them.
func nodeJSON(n *yaml.Node, apiVersion, kind string) (b []byte, ok bool) {
	if n.Kind != yaml.MappingNode {
		return nil, false
	}
	b = make([]byte, 0, 512)
	b, ok = appendNode(b, n)
	if !ok {
		return nil, false
	}
	extra := func(key, val string) {
		if val == "" || hasKey(n, key) {
			return
		}
		b = b[:len(b)-1] // the closing brace
		if b[len(b)-1] != '{' {
			b = append(b, ',')
		}
		b = appendString(append(appendString(b, key), ':'), val)
		b = append(b, '}')
	}
	extra("apiVersion", apiVersion)
	extra("kind", kind)
	return b, true
}

func hasKey(n *yaml.Node, key string) bool {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return true
		}
	}
	return false
}

var jsonNumber = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?$`)

func appendNode(b []byte, n *yaml.Node) ([]byte, bool) {
	switch n.Kind {
	case yaml.MappingNode:
		b = append(b, '{')
		seen := make(map[string]bool, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode || k.ShortTag() != "!!str" || seen[k.Value] {
				return nil, false // merge keys, non-string or duplicate keys
			}
			seen[k.Value] = true
			if i > 0 {
				b = append(b, ',')
			}
			b = append(appendString(b, k.Value), ':')
			var ok bool
			if b, ok = appendNode(b, n.Content[i+1]); !ok {
				return nil, false
			}
		}
		return append(b, '}'), true
	case yaml.SequenceNode:
		b = append(b, '[')
		for i, c := range n.Content {
			if i > 0 {
				b = append(b, ',')
			}
			var ok bool
			if b, ok = appendNode(b, c); !ok {
				return nil, false
			}
		}
		return append(b, ']'), true
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!str":
			return appendString(b, n.Value), true
		case "!!null":
			return append(b, "null"...), true
		case "!!bool":
			if n.Value == "true" || n.Value == "false" {
				return append(b, n.Value...), true
			}
		case "!!int", "!!float":
			if jsonNumber.MatchString(n.Value) {
				return append(b, n.Value...), true
			}
		}
	}
	return nil, false // aliases, other tags, YAML-only number forms
}

// appendString appends s as a JSON string (s is valid UTF-8: ParseLimits
// checked the file).
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			_, size := utf8.DecodeRuneInString(s[i:])
			b = append(b, s[i:i+size]...)
			i += size
			continue
		}
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
		default:
			b = append(b, c)
		}
		i++
	}
	return append(b, '"')
}
