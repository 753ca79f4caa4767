package file

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/baremesh/baremesh/core/config"
)

// Parse decodes every document in data (YAML, multi-document, or JSON) and
// types and validates it. It returns the configs of the documents that are
// good and one DocError per bad document, each naming path and the
// document's line. A file is all-or-nothing for the watcher, but Parse
// reports every problem so a person can fix them in one go. source names
// the source instance in each Config's Source.
func Parse(data []byte, path, source string) ([]config.Config, []*config.DocError) {
	if i := bytes.IndexByte(data, 0); i >= 0 {
		return nil, []*config.DocError{{File: path, Line: 1 + bytes.Count(data[:i], []byte{'\n'}),
			Err: fmt.Errorf("%w: binary data (NUL byte at offset %d), not YAML or JSON", config.ErrParse, i)}}
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, []*config.DocError{{File: path, Err: fmt.Errorf("%w: file is empty; delete it to remove its resources", config.ErrParse)}}
	}
	var (
		out   []config.Config
		errs  []*config.DocError
		seen  = map[config.Key]int{}
		dec   = yaml.NewDecoder(bytes.NewReader(data))
		start = 1
	)
	for {
		var node yaml.Node
		err := dec.Decode(&node)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			// The decoder cannot resume after a syntax error.
			errs = append(errs, &config.DocError{File: path, Line: yamlErrorLine(err, start), Err: fmt.Errorf("%w: %s", config.ErrParse, cleanYAMLError(err))})
			break
		}
		line := docLine(&node)
		start = line
		if isEmptyDoc(&node) {
			continue
		}
		if node.Content[0].Kind != yaml.MappingNode {
			errs = append(errs, &config.DocError{File: path, Line: line, Err: fmt.Errorf("%w: document is not a mapping of apiVersion, kind, metadata and spec", config.ErrParse)})
			continue
		}
		var raw map[string]any
		if err := node.Decode(&raw); err != nil {
			errs = append(errs, &config.DocError{File: path, Line: yamlErrorLine(err, line), Err: fmt.Errorf("%w: %s", config.ErrParse, cleanYAMLError(err))})
			continue
		}
		c, err := config.Typed(raw, config.Source{Name: source, File: path, Line: line})
		if err != nil {
			errs = append(errs, &config.DocError{File: path, Line: line, Resource: resourceName(raw), Err: err})
			continue
		}
		if prev, dup := seen[c.Key()]; dup {
			errs = append(errs, &config.DocError{File: path, Line: line, Resource: c.Key().String(),
				Err: fmt.Errorf("%w: duplicate: the same kind, namespace and name is defined at line %d of this file", config.ErrInvalid, prev)})
			continue
		}
		seen[c.Key()] = line
		out = append(out, c)
	}
	return out, errs
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
