package config_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/baremesh/baremesh/core/config"
)

// benchIstioDir holds Istio's own xDS benchmark configurations, shared
// outside the repository.
const benchIstioDir = "../../../shared/bench/istio"

// TestBenchIstioConfigsValidate types every document of Istio's benchmark
// configurations whose kind baremesh reads: Istio accepts them all, so
// baremesh must too. Documents of other kinds are counted and skipped.
func TestBenchIstioConfigsValidate(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(benchIstioDir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Skipf("no Istio benchmark configurations in %s", benchIstioDir)
	}
	typedKinds := map[string]int{}
	skipped := map[string]int{}
	merged := 0
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		docs, m := splitDocuments(string(data))
		merged += m
		for _, d := range docs {
			js, err := yaml.YAMLToJSON([]byte(d.text))
			if err != nil {
				t.Errorf("%s:%d: %v", file, d.line, err)
				continue
			}
			var raw map[string]any
			if err := json.Unmarshal(js, &raw); err != nil || raw == nil {
				continue // empty or comment-only document
			}
			kind, _ := raw["kind"].(string)
			if config.SchemaFor(config.Kind(kind)) == nil {
				skipped[kind]++
				continue
			}
			if _, err := config.Typed(raw, config.Source{Name: "bench", File: file, Line: d.line}); err != nil {
				t.Errorf("%s:%d: %s: %v", filepath.Base(file), d.line, kind, err)
				continue
			}
			typedKinds[kind]++
		}
	}
	t.Logf("typed: %v", sortedCounts(typedKinds))
	if merged > 0 {
		t.Logf("%d manifests follow another without a --- separator; split at their apiVersion line", merged)
	}
	if len(skipped) > 0 {
		t.Logf("skipped (not a baremesh kind): %v", sortedCounts(skipped))
	}
}

type document struct {
	text string
	line int // 1-based line of the document's first line
}

// splitDocuments splits a YAML stream on lines that are exactly "---".
// It also starts a new document at a top-level "apiVersion:" when the
// current one already has one: some of Istio's rendered files omit the
// separator, and YAML would read both manifests as one mapping whose
// repeated keys keep the last value. merged counts those.
func splitDocuments(s string) (docs []document, merged int) {
	var b strings.Builder
	start, hasAPIVersion := 1, false
	for i, l := range strings.Split(s, "\n") {
		l = strings.TrimRight(l, "\r")
		sep := l == "---"
		if strings.HasPrefix(l, "apiVersion:") {
			if hasAPIVersion {
				sep = true
				merged++
			}
		}
		if sep {
			docs = append(docs, document{b.String(), start})
			b.Reset()
			start, hasAPIVersion = i+2, false
			if l == "---" {
				continue
			}
			start = i + 1
		}
		if strings.HasPrefix(l, "apiVersion:") {
			hasAPIVersion = true
		}
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return append(docs, document{b.String(), start}), merged
}

func sortedCounts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		name := k
		if name == "" {
			name = "(no kind)"
		}
		b.WriteString(name + "=" + strconv.Itoa(m[k]))
	}
	return b.String()
}
