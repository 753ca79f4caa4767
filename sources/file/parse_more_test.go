package file_test

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	security "istio.io/api/security/v1beta1"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/sources/file"
)

// Issue #11 item 9: a problem names the line of the field at fault, and a
// byte that is not UTF-8 its own line.
func TestProblemLines(t *testing.T) {
	cases := []struct {
		name string
		data string
		line int
		want string
	}{
		{"non-UTF-8 byte", good + "# caf\xe9\n", 8, `invalid UTF-8 \(byte 0xe9 at line 8, column 6\)`},
		{"non-UTF-8 in a value", "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata:\n  name: a\n  labels: {app: \"\xff\"}\n", 5, `invalid UTF-8`},
		{"nested field", "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: a}\nspec:\n  hosts: [a.example.com]\n  resolution: DNS\n  ports:\n  - number: 80\n    name: http\n  - number: 80\n    name: http2\n", 10, `spec.ports\[1\].number: port 80 is already declared`},
		{"snake_case key", "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: a}\nspec:\n  hosts: [a.example.com]\n  resolution: STATIC\n  endpoints: [{address: 10.0.0.1}]\n  workload_selector:\n    labels: {app: a}\n", 8, `workloadSelector`},
		{"label with dots", "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata:\n  name: a\n  labels:\n    ok: x\n    app.kubernetes.io/name: \"bad value!\"\nspec: {hosts: [a.example.com], resolution: DNS}\n", 7, `metadata.labels\[app.kubernetes.io/name\]`},
		{"bad enum", se("  hosts: [a.example.com]\n  ports: [{number: 80, name: http}]\n\n  resolution: SOMETIMES\n"), 8, `resolution`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, errs := file.Parse([]byte(tc.data), "x.yaml", "file")
			if len(errs) != 1 {
				t.Fatalf("errs = %v", errs)
			}
			if errs[0].Line != tc.line || !matches(tc.want, errs[0].Error()) {
				t.Fatalf("got %q at line %d, want line %d matching %q", errs[0].Error(), errs[0].Line, tc.line, tc.want)
			}
		})
	}
}

// Issue #11 item 7: kubectl's List and the API's <Kind>List are read
// item by item, each located by its own line.
func TestKindList(t *testing.T) {
	list := `apiVersion: v1
kind: List
metadata: {resourceVersion: ""}
items:
- apiVersion: networking.istio.io/v1
  kind: ServiceEntry
  metadata: {name: a, namespace: test}
  spec: {hosts: [a.example.com], ports: [{number: 80, name: http}], resolution: DNS}
- apiVersion: networking.istio.io/v1
  kind: DestinationRule
  metadata: {name: a, namespace: test}
  spec: {host: a.example.com}
`
	cfgs, errs := file.Parse([]byte(list), "x.yaml", "file")
	if len(errs) != 0 || len(cfgs) != 2 {
		t.Fatalf("cfgs=%d errs=%v", len(cfgs), errs)
	}
	if cfgs[0].Source.Line != 5 || cfgs[1].Source.Line != 9 || cfgs[1].Key().Kind != config.DestinationRule {
		t.Fatalf("items at %v, %v (%s)", cfgs[0].Source, cfgs[1].Source, cfgs[1].Key())
	}

	typed := `apiVersion: networking.istio.io/v1
kind: ServiceEntryList
items:
- metadata: {name: a, namespace: test}
  spec: {hosts: [a.example.com], ports: [{number: 80, name: http}], resolution: DNS}
- metadata: {name: b, namespace: test}
  spec:
    hosts: [b.example.com]
    ports: [{number: 0, name: http}]
    resolution: DNS
`
	cfgs, errs = file.Parse([]byte(typed), "x.yaml", "file")
	if len(cfgs) != 1 || cfgs[0].Key().Kind != config.ServiceEntry || len(errs) != 1 {
		t.Fatalf("cfgs=%d errs=%v", len(cfgs), errs)
	}
	if errs[0].Line != 9 || errs[0].Resource != "ServiceEntry/test/b" {
		t.Fatalf("bad item reported as %q (line %d)", errs[0].Error(), errs[0].Line)
	}

	for bad, line := range map[string]int{"apiVersion: v1\nkind: List\nitems: {a: b}\n": 3, "apiVersion: v1\nkind: List\nitems:\n- just a string\n": 4} {
		if cfgs, errs := file.Parse([]byte(bad), "x.yaml", "file"); len(cfgs) != 0 || len(errs) != 1 || errs[0].Line != line {
			t.Errorf("%q: cfgs=%d errs=%v", bad, len(cfgs), errs)
		}
	}
}

// Issue #11 item 5: documents per file and nodes per resource are
// bounded, the limits are named in the error, and aliases count.
func TestLimits(t *testing.T) {
	lim := file.Limits{MaxDocuments: 3, MaxNodes: 200}
	var many strings.Builder
	for i := range 5 {
		fmt.Fprintf(&many, "%s---\n", strings.Replace(good, "name: a", fmt.Sprintf("name: a%d", i), 1))
	}
	cfgs, errs := file.ParseLimits([]byte(many.String()), "x.yaml", "file", lim)
	if len(cfgs) != 3 || len(errs) != 1 || !matches(`more than 3 resources in one file \(maxDocuments\)`, errs[0].Error()) || errs[0].Line != 25 {
		t.Fatalf("cfgs=%d errs=%v", len(cfgs), errs)
	}

	big := se("  hosts: [" + strings.Repeat("a.example.com, ", 300) + "a.example.com]\n  resolution: NONE\n")
	cfgs, errs = file.ParseLimits([]byte(big), "x.yaml", "file", lim)
	if len(cfgs) != 0 || len(errs) != 1 || !matches(`more than 200 YAML nodes \(maxNodes\)`, errs[0].Error()) || errs[0].Line != 1 {
		t.Fatalf("cfgs=%d errs=%v", len(cfgs), errs)
	}

	// 30 nodes behind an anchor, used 10 times: 300 nodes once expanded.
	alias := "x: &l [" + strings.Repeat("a, ", 29) + "a]\ny: [" + strings.Repeat("*l, ", 9) + "*l]\n"
	_, errs = file.ParseLimits([]byte(alias), "x.yaml", "file", lim)
	if len(errs) != 1 || !matches(`maxNodes`, errs[0].Error()) {
		t.Fatalf("aliases not counted: %v", errs)
	}

	// Problems reported for one file are bounded too.
	_, errs = file.ParseLimits([]byte(strings.Repeat("---\n- a\n", 500)), "x.yaml", "file", file.Limits{})
	if len(errs) != 101 || !matches(`400 more problems not shown`, errs[100].Error()) {
		t.Fatalf("%d errors, last %v", len(errs), errs[len(errs)-1])
	}
}

func matches(re, s string) bool { return regexp.MustCompile(re).MatchString(s) }

// A List in a watched directory loads, and a file over a limit keeps
// what it held.
func TestListAndLimitsInWatcher(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.yaml")
	write(t, path, "apiVersion: v1\nkind: List\nitems:\n"+indentItem(good)+indentItem(strings.Replace(good, "name: a", "name: b", 1)))
	r := run(t, file.Options{Dirs: []string{dir}, MaxNodes: 500})
	if r.port("a") != 80 || r.port("b") != 80 {
		t.Fatalf("List items not loaded: a=%d b=%d problems=%+v", r.port("a"), r.port("b"), r.agg.Problems())
	}
	write(t, path, se("  hosts: ["+strings.Repeat("a.example.com, ", 600)+"a.example.com]\n  resolution: NONE\n"))
	checkProblem(t, r, path, 1, `more than 500 YAML nodes \(maxNodes\)`)
	if r.port("a") != 80 || r.port("b") != 80 {
		t.Fatal("last good lost")
	}
}

func indentItem(doc string) string {
	lines := strings.Split(strings.TrimSuffix(doc, "\n"), "\n")
	for i := range lines {
		if i == 0 {
			lines[i] = "- " + lines[i]
		} else {
			lines[i] = "  " + lines[i]
		}
	}
	return strings.Join(lines, "\n") + "\n"
}

// Issue #25 item 7: PeerAuthentication portLevelMtls as Istio's
// documentation writes it, with integer keys, is read as the Kubernetes
// API reads it; it was refused.
func TestPortLevelMtlsIntegerKeys(t *testing.T) {
	cfgs, errs := file.Parse([]byte(portLevelMtlsDoc), "pa.yaml", "file")
	if len(errs) != 0 || len(cfgs) != 1 {
		t.Fatalf("configs %d, errors %v", len(cfgs), errs)
	}
	got := cfgs[0].Spec.(*security.PeerAuthentication).GetPortLevelMtls()
	if len(got) != 2 || got[8080].GetMode() != security.PeerAuthentication_MutualTLS_DISABLE || got[9090].GetMode() != security.PeerAuthentication_MutualTLS_PERMISSIVE {
		t.Fatalf("portLevelMtls = %v", got)
	}
}

// portLevelMtlsDoc is the example of Istio's PeerAuthentication reference.
const portLevelMtlsDoc = `apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata:
  name: finance
  namespace: foo
spec:
  selector:
    matchLabels:
      app: finance
  mtls:
    mode: STRICT
  portLevelMtls:
    8080:
      mode: DISABLE
    9090:
      mode: PERMISSIVE
`
