package file_test

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/sources/file"
	"github.com/baremesh/baremesh/sources/sourcetest"
)

const good = `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: a, namespace: test}
spec:
  hosts: [a.example.com]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: DNS
`

func se(extra string) string {
	return "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: a, namespace: test}\nspec:\n" + extra
}

// TestBadInput runs every kind of bad file through a running watcher: each
// must be reported with the file and line and a reason, and the
// resources the file held before must stay in force.
func TestBadInput(t *testing.T) {
	cases := []struct {
		name    string
		content string
		line    int    // the line the problem must name; 0 = any
		reason  string // regexp the problem must match
	}{
		{"invalid yaml", "apiVersion: v1\nkind: [unclosed\n", 1, `did not find expected|flow sequence`},
		{"tab indented", "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata:\n\tname: a\n", 4, `tab|cannot start any token`},
		{"unknown kind", "apiVersion: networking.istio.io/v1\nkind: Frobnicator\nmetadata: {name: a}\nspec: {}\n", 1, `unknown kind "Frobnicator"`},
		{"unknown field", se("  hosts: [a.example.com]\n  frob: 1\n  ports: [{number: 80, name: http}]\n  resolution: DNS\n"), 6, `unknown field "frob"`},
		{"wrong api version", strings.Replace(good, "networking.istio.io/v1", "networking.istio.io/v2", 1), 1, `unsupported apiVersion "networking.istio.io/v2"`},
		{"missing name", strings.Replace(good, "name: a, ", "", 1), 3, `metadata.name: required`},
		{"duplicate within file", good + "---\n" + good, 9, `duplicate.*line 1 of this file`},
		{"invalid host", se("  hosts: [\"bad_host!\"]\n  ports: [{number: 80, name: http}]\n  resolution: DNS\n"), 5, `hosts`},
		{"port 0", se("  hosts: [a.example.com]\n  ports: [{number: 0, name: http}]\n  resolution: DNS\n"), 6, `ports\[0\]\.number`},
		{"port 70000", se("  hosts: [a.example.com]\n  ports: [{number: 70000, name: http}]\n  resolution: DNS\n"), 6, `ports\[0\]\.number`},
		{"weights not 100", "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: a, namespace: test}\nspec:\n  hosts: [a.example.com]\n  http:\n  - route:\n    - {destination: {host: a.example.com, subset: v1}, weight: 50}\n    - {destination: {host: a.example.com, subset: v2}, weight: 20}\n", 7, `weight`},
		{"selector and endpoints", se("  hosts: [a.example.com]\n  ports: [{number: 80, name: http}]\n  resolution: STATIC\n  workloadSelector: {labels: {app: a}}\n  endpoints: [{address: 10.0.0.1}]\n"), 8, `workloadSelector|endpoints`},
		{"binary garbage", "\x00\x01\x02\xff\xfegarbage", 1, `binary data`},
		{"empty file", "", 0, `empty`},
		{"only whitespace", "\n\n   \n", 0, `empty`},
		{"not a mapping", "- a\n- b\n", 1, `not a mapping`},
		{"second document bad", good + "---\n" + strings.Replace(good, "name: a", "name: b", 1) + "  frob: 2\n", 16, `unknown field "frob"`},
		{"invalid namespace", strings.Replace(good, "namespace: test", "namespace: Bad_NS", 1), 3, `metadata.namespace`},
		{"spec is a string", "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: a, namespace: test}\nspec: hello\n", 1, `cannot|spec`},
		{"missing kind", "apiVersion: networking.istio.io/v1\nmetadata: {name: a}\n", 1, `no kind`},
		{"duplicate yaml key", "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nkind: ServiceEntry\nmetadata: {name: a}\n", 3, `already (defined|set)`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "a.yaml")
			write(t, path, good)
			r := run(t, file.Options{Dirs: []string{dir}})
			if r.port("a") != 80 {
				t.Fatal("good file not loaded")
			}
			write(t, path, tc.content)
			poll(t, "a problem for "+path, func() bool { return r.problemFor(path) != "" })
			checkProblem(t, r, path, tc.line, tc.reason)
			if r.port("a") != 80 {
				t.Fatalf("last good resource lost after bad input")
			}
		})
	}
}

// checkProblem waits for the problem: a writer that truncates and then
// writes can show a passing "file is empty" first.
func checkProblem(t *testing.T, r *running, path string, line int, reason string) {
	t.Helper()
	re := regexp.MustCompile(reason)
	found := func() bool {
		for _, p := range r.agg.Problems() {
			if p.Origin == path && (line == 0 || p.Line == line) && re.MatchString(p.Error) {
				return true
			}
		}
		return false
	}
	deadline := time.Now().Add(10 * time.Second)
	for !found() {
		if time.Now().After(deadline) {
			t.Fatalf("no problem for %s line %d matching %q; problems: %+v", path, line, reason, r.agg.Problems())
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestDuplicateAcrossFiles(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.yaml"), good)
	r := run(t, file.Options{Dirs: []string{dir}})
	b := filepath.Join(dir, "b.yaml")
	write(t, b, strings.Replace(good, "80", "81", 1))
	poll(t, "duplicate reported", func() bool { return r.problemFor(b) != "" })
	checkProblem(t, r, b, 1, `already defined in .*a\.yaml:1`)
	if r.port("a") != 80 {
		t.Fatal("the second definition replaced the first")
	}
	// Moving the resource from a.yaml to b.yaml in one burst is fine.
	if err := os.Remove(filepath.Join(dir, "a.yaml")); err != nil {
		t.Fatal(err)
	}
	poll(t, "b.yaml to take over", func() bool { return r.port("a") == 81 && r.problemFor(b) == "" })
}

func TestSizeLimitNamed(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.yaml")
	write(t, path, good)
	r := run(t, file.Options{Dirs: []string{dir}, MaxFileSize: 1 << 20})
	big := good + "# " + strings.Repeat("x", 50<<20) + "\n"
	write(t, path, big)
	poll(t, "size problem", func() bool { return r.problemFor(path) != "" })
	checkProblem(t, r, path, 0, `over the size limit of 1048576 bytes \(maxFileSize\)`)
	if r.port("a") != 80 {
		t.Fatal("last good lost")
	}
}

func TestSymlinkLoop(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.yaml"), good)
	r := run(t, file.Options{Dirs: []string{dir}})
	loop := filepath.Join(dir, "loop.yaml")
	if err := os.Symlink(loop, loop); err != nil {
		t.Fatal(err)
	}
	poll(t, "loop problem", func() bool { return r.problemFor(loop) != "" })
	checkProblem(t, r, loop, 0, `too many levels of symbolic links`)
	if r.port("a") != 80 {
		t.Fatal("good file lost")
	}
	// A looping directory symlink is not followed.
	if err := os.Symlink(dir, filepath.Join(dir, "sub")); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "b.yaml"), strings.Replace(good, "name: a", "name: b", 1))
	poll(t, "b after dir loop", func() bool { return r.port("b") == 80 })
}

func TestFileDeletedWhileRead(t *testing.T) {
	// The watcher learns of the file and it is gone before the read: the
	// result is simply "no such file", never a half-read state.
	dir := t.TempDir()
	write(t, filepath.Join(dir, "keep.yaml"), strings.Replace(good, "name: a", "name: keep", 1))
	r := run(t, file.Options{Dirs: []string{dir}, Coalesce: 20e6})
	for i := 0; i < 50; i++ {
		p := filepath.Join(dir, "flash.yaml")
		write(t, p, good)
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	write(t, filepath.Join(dir, "marker.yaml"), strings.Replace(good, "name: a", "name: marker", 1))
	poll(t, "marker", func() bool { return r.port("marker") == 80 })
	poll(t, "flash gone", func() bool { return r.port("a") == 0 })
	if r.port("keep") != 80 || len(r.agg.Problems()) != 0 {
		t.Fatalf("keep=%d problems=%+v", r.port("keep"), r.agg.Problems())
	}
}

func TestParseReportsEveryDocument(t *testing.T) {
	data := []byte(good + "---\n" + strings.Replace(good, "80", "0", 1) + "---\nkind: Nope\n")
	cfgs, errs := file.Parse(data, "x.yaml", "file")
	if len(cfgs) != 1 || len(errs) != 2 {
		t.Fatalf("cfgs=%d errs=%v", len(cfgs), errs)
	}
	// The line of the field at fault (ports, line 14), not of the document.
	want := regexp.MustCompile(`^x\.yaml:14: ServiceEntry/test/a: `)
	if !want.MatchString(errs[0].Error()) {
		t.Fatalf("error %q does not have the form file:line: kind/ns/name: reason", errs[0])
	}
	if errs[1].Line != 17 {
		t.Fatalf("third doc line = %d, want 17", errs[1].Line)
	}
	if cfgs[0].Source.File != "x.yaml" || cfgs[0].Source.Line != 1 || cfgs[0].Key() != (config.Key{Kind: config.ServiceEntry, Namespace: "test", Name: "a"}) {
		t.Fatalf("config = %+v", cfgs[0].Meta)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(good))
	f.Add([]byte(good + "---\n" + good))
	f.Add([]byte(sourcetest.ServiceEntry("x", 1)))
	f.Add([]byte("{\"apiVersion\":\"networking.istio.io/v1\",\"kind\":\"ServiceEntry\"}"))
	f.Add([]byte(portLevelMtlsDoc))
	f.Add([]byte(strings.Replace(portLevelMtlsDoc, "8080:", "? [1, 2]\n    :", 1))) // a key that is a list
	f.Fuzz(func(t *testing.T, data []byte) {
		cfgs, errs := file.Parse(data, "f.yaml", "file")
		for _, e := range errs {
			if !bytes.Contains([]byte(e.Error()), []byte("f.yaml")) {
				t.Fatalf("error without file name: %v", e)
			}
		}
		for _, c := range cfgs {
			if c.Spec == nil || c.Name == "" {
				t.Fatalf("config without spec or name: %+v", c.Meta)
			}
		}
	})
}
