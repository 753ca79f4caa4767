package file

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
)

// The scalars and keys of the fast path (fastyaml.go): what yaml.v3
// would make of them, or a refusal where it would make something else.

// plain writes a plain scalar as nodeJSON would, or fails where yaml.v3
// would type it otherwise (or where nodeJSON gives up).
func (p *fastParser) plain(v []byte) {
	if !p.node() {
		return
	}
	switch string(v) {
	case "null", "Null", "NULL", "~":
		p.out = append(p.out, "null"...)
		return
	case "true", "false":
		p.out = append(p.out, v...)
		return
	}
	switch c := v[0]; {
	case (c == '-' || c == '+' || c == '.') && (len(v) == 1 || v[1] == ' '):
		p.fail() // "key: - a" is a sequence item where it may not be
		return
	case c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.':
		switch numberLike(v) {
		case 'n':
			p.out = append(p.out, v...)
		case 's':
			p.out = appendString(p.out, string(v))
		default:
			p.fail()
		}
		return
	case isIndicator(c):
		p.fail()
		return
	}
	switch string(v) {
	case "True", "TRUE", "False", "FALSE", "<<":
		p.fail()
		return
	}
	p.out = appendString(p.out, string(v))
}

// yamlFloat is yaml.v3's float form.
var yamlFloat = regexp.MustCompile(`^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`)

// numberLike says what yaml.v3 makes of a plain scalar that starts with
// a digit, a sign or a dot, as its resolve does: 'n' a JSON number it
// types as an int or a float (nodeJSON writes it as it is), 's' a
// string (an IP address, a version), 0 anything else (a timestamp,
// another number form, .inf: yaml.v3's path).
func numberLike(v []byte) byte {
	s := string(v)
	if jsonNumber.MatchString(s) {
		if _, err := strconv.ParseFloat(s, 64); err == nil {
			return 'n'
		}
		return 0
	}
	if s[0] == '.' || len(s) > 4 && s[4] == '-' && strings.Trim(s[:4], "0123456789") == "" {
		return 0 // .inf, .nan, .5; a timestamp maybe
	}
	plain := strings.ReplaceAll(s, "_", "")
	if _, err := strconv.ParseInt(plain, 0, 64); err == nil {
		return 0
	}
	if _, err := strconv.ParseUint(plain, 0, 64); err == nil {
		return 0
	}
	for _, prefix := range []string{"0b", "-0b", "+0b", "0o", "-0o", "+0o"} {
		if strings.HasPrefix(plain, prefix) {
			return 0
		}
	}
	if yamlFloat.MatchString(plain) || strings.ContainsAny(s, "eE") && yamlFloat.MatchString(strings.ToLower(plain)) {
		return 0
	}
	return 's'
}

// isIndicator: a plain scalar cannot start with it (or means something
// else when it does).
func isIndicator(c byte) bool {
	switch c {
	case '-', '?', ':', ',', '[', ']', '{', '}', '#', '&', '*', '!', '|', '>', '\'', '"', '%', '@', '`':
		return true
	}
	return false
}

// splitKey splits "key: rest" (or "key:"), with key plain or quoted; rest
// is what follows the colon, without leading spaces.
func splitKey(text []byte) (key string, rest []byte, ok bool) {
	i := 0
	if text[0] == '"' || text[0] == '\'' {
		key, i = quoted(text, 0)
		if i < 0 {
			return "", nil, false
		}
		i = skipSpaces(text, i)
		if i >= len(text) || text[i] != ':' {
			return "", nil, false
		}
	} else {
		for i < len(text) && !(text[i] == ':' && (i+1 == len(text) || text[i+1] == ' ')) {
			i++
		}
		if i == len(text) {
			return "", nil, false
		}
		key = string(bytes.TrimRight(text[:i], " "))
		if !plainKey(key) {
			return "", nil, false
		}
	}
	if i+1 < len(text) && text[i+1] != ' ' {
		return "", nil, false
	}
	rest = bytes.TrimLeft(text[i+1:], " ")
	if len(rest) > 0 && rest[0] == '#' {
		rest = nil
	}
	return key, rest, true
}

// plainKey: a plain key that yaml.v3 reads as a string, of the
// characters keys are made of.
func plainKey(k string) bool {
	if k == "" {
		return false
	}
	switch k {
	case "null", "Null", "NULL", "true", "True", "TRUE", "false", "False", "FALSE", "<<":
		return false
	}
	if c := k[0]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_') {
		return false
	}
	for i := 1; i < len(k); i++ {
		switch c := k[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-', c == '.', c == '/':
		default:
			return false
		}
	}
	return true
}

// quoted reads the one-line quoted scalar at s[i] and returns its value
// and the index after it, or -1: no closing quote on the line, or an
// escape in a double-quoted scalar.
func quoted(s []byte, i int) (string, int) {
	q := s[i]
	if q == '"' {
		j := bytes.IndexByte(s[i+1:], '"')
		if j < 0 || bytes.IndexByte(s[i+1:i+1+j], '\\') >= 0 {
			return "", -1
		}
		return string(s[i+1 : i+1+j]), i + j + 2
	}
	var b []byte
	for j := i + 1; j < len(s); j++ {
		if s[j] != '\'' {
			b = append(b, s[j])
			continue
		}
		if j+1 < len(s) && s[j+1] == '\'' {
			b = append(b, '\'')
			j++
			continue
		}
		return string(b), j + 1
	}
	return "", -1
}

// newKey reports whether key is not among seen, which is short (a
// mapping of more keys takes yaml.v3's path: comparing them here would
// cost the square of their number).
func newKey(seen []string, key string) bool {
	if len(seen) >= 64 {
		return false
	}
	for _, k := range seen {
		if k == key {
			return false
		}
	}
	return true
}

func skipSpaces(s []byte, i int) int {
	for i < len(s) && s[i] == ' ' {
		i++
	}
	return i
}
