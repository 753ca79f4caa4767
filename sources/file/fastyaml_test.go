package file

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// yamlV3Docs is what yaml.v3 and nodeJSON make of data: each non-empty
// document's JSON and root line, or ok false when yaml.v3 refuses it or
// nodeJSON gives up (the generic path's cases).
func yamlV3Docs(data []byte) (docs []fastDoc, ok bool) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return docs, true
		}
		if err != nil {
			return nil, false
		}
		if isEmptyDoc(&n) {
			continue
		}
		root := n.Content[0]
		b, ok := nodeJSON(root, "", "")
		if !ok {
			return nil, false
		}
		docs = append(docs, fastDoc{json: b, line: root.Line})
	}
}

// agree fails t when fastDocs reads data and yaml.v3 reads it otherwise.
func agree(t *testing.T, data []byte) (fast bool) {
	t.Helper()
	got, ok := fastDocs(data, Limits{}.WithDefaults())
	if !ok {
		return false
	}
	want, wok := yamlV3Docs(data)
	if !wok {
		t.Fatalf("fast path read what yaml.v3 and nodeJSON do not:\n%s\nfast: %s", data, show(got))
	}
	if show(got) != show(want) {
		t.Fatalf("fast path and yaml.v3 differ on\n%s\nfast:   %s\nyaml.v3: %s", data, show(got), show(want))
	}
	return true
}

func show(docs []fastDoc) string {
	var b strings.Builder
	for _, d := range docs {
		fmt.Fprintf(&b, "line %d %s\n", d.line, d.json)
	}
	return b.String()
}

// TestFastYAMLAgreesWithYAMLv3: the fast path reads the shapes config
// files have exactly as yaml.v3 and nodeJSON do (same JSON, same root
// line), and leaves everything else to them.
func TestFastYAMLAgreesWithYAMLv3(t *testing.T) {
	fast := []string{
		"apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: s1, namespace: ns1}\nspec:\n  hosts: [s1.ns1.mesh]\n  addresses: [10.0.0.1]\n  ports: [{number: 80, name: http, protocol: HTTP}]\n  resolution: DNS\n",
		"# lead\n---\napiVersion: v1 # c\nkind: K\nmetadata:\n  name: a\n  labels:\n    app.kubernetes.io/name: x\n    'quoted': \"it's\"\nspec:\n  list:\n  - a\n  - b: 1\n    c: -2.5e3\n  -\n    d: null\n  - ~\n  empty:\n  t: true\n  f: false\n---\n---\n  k: v\n",
		"a:\n- x\n- y\nb: [1, [2, {c: d}], {}, []]\nc: 'a''b'\nd: http://x:80/y#z\ne: a#b\nf: \"x: y\"\n",
		"a: yes\nb: no\nc: on\nd: off\ne: y\nf: n\ng: Yes\n",
		"a: 0\nb: -0\nc: 1.5\nd: 12345678901234567890\ne: 1e5\n",
		"- a\n",          // a root sequence: yaml.v3's path
		"a: b\n\tc: d\n", // tab
	}
	other := []string{
		"a: &x 1\nb: *x\n", "a: !!str 1\n", "a: |\n  x\n", "a: >\n  x\n", "? a\n: b\n", "%YAML 1.2\n---\na: 1\n",
		"a: b\n  c\n", "a: [1,\n 2]\n", "a: \"x\\ny\"\n", "1: a\n", "true: a\n", "a: 1\na: 2\n", "<<: {a: 1}\n",
		"a: True\n", "a: 0x10\n", "a: 1_000\n", "a: .inf\n", "a: 2001-12-14\n", "a: 007\n", "a: +1\n", "a: 1e400\n",
		"a: b: c\n", "a: b:\n", "- - a\n", "a: [b, ]\n", "a: {b}\n", "a: {b:c}\n", "a: [b: c]\n", "a: 'x\n", "---x\n", "...\n",
		"a: héllo\n", "a: b\r\n", "items: []\nkind: List\napiVersion: v1\n",
	}
	for _, s := range fast[:5] {
		if !agree(t, []byte(s)) {
			t.Errorf("fast path refused\n%s", s)
		}
	}
	for _, s := range append(fast[5:], other...) {
		if agree(t, []byte(s)) {
			t.Errorf("fast path read what it should leave to yaml.v3:\n%s", s)
		}
	}
	// Every config file in the repository's examples and test data.
	for _, glob := range []string{"../../examples/*/*.yaml", "../../examples/*/*/*.yaml", "testdata/*.yaml", "../../internal/*/testdata/*.yaml", "../../internal/*/testdata/*/*.yaml"} {
		files, _ := filepath.Glob(glob)
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			agree(t, data)
		}
	}
}

// FuzzFastYAML: whatever the fast path reads, yaml.v3 and nodeJSON read
// the same way.
func FuzzFastYAML(f *testing.F) {
	for _, s := range []string{
		"apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: s1, namespace: ns1}\nspec:\n  hosts: [s1.ns1.mesh]\n  ports: [{number: 80, name: http, protocol: HTTP}]\n",
		"a:\n- x\n- y: 1\n  z: [1, {c: d}]\nb: 'q''q'\nc: \"d\"\n---\ne: ~\n",
		"a: b # c\nd:\n  e: -1.5\n  f:\n  - g\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		agree(t, data)
	})
}
