// Package arch checks the import rules README "Layout" states: core
// imports nothing of ours outside core; sources and xdsserver import core,
// never each other; nodeagent stands alone; the xdsserver packages' order
// (arch_test.go); the translation packages do no I/O (pure_test.go); the
// commands link only what they need (link_test.go).
package arch

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/baremesh/baremesh/"

// forbidden lists, per tree, the trees of ours it must not import.
var forbidden = map[string][]string{
	"core":      {"sources", "xdsserver", "nodeagent", "cmd", "internal"},
	"sources":   {"xdsserver", "nodeagent", "cmd", "internal"},
	"xdsserver": {"sources", "nodeagent", "cmd", "internal"},
	"nodeagent": {"core", "sources", "xdsserver", "cmd", "internal/daemon", "internal/e2e", "internal/load"},

	// The daemon's configuration is read by tools that must not link the
	// daemon (link_test.go checks the binaries).
	"internal/daemonconfig": {"internal/daemon", "cmd"},

	// Inside xdsserver: the generators know nothing of serving; the type
	// table knows the generators only; the wire (bytes) knows neither the
	// protocol nor generation; generation does not know the protocol;
	// only the wiring and the debug pages know the protocol.
	"xdsserver/gen":        {"xdsserver/xdstype", "xdsserver/wire", "xdsserver/generation", "xdsserver/ads", "xdsserver/debug"},
	"xdsserver/xdstype":    {"xdsserver/wire", "xdsserver/generation", "xdsserver/ads", "xdsserver/debug"},
	"xdsserver/wire":       {"xdsserver/xdstype", "xdsserver/generation", "xdsserver/ads", "xdsserver/debug"},
	"xdsserver/generation": {"xdsserver/ads", "xdsserver/debug"},
	"xdsserver/ads":        {"xdsserver/debug"},
	// The TLS port is transport: it knows no service on it; the CA
	// service knows the port and no other part of the xDS server.
	"xdsserver/tlsport": {"xdsserver/ca", "xdsserver/ads", "xdsserver/gen", "xdsserver/generation", "xdsserver/xdstype", "xdsserver/wire", "xdsserver/debug", "xdsserver/dryrun", "xdsserver/envoyfilter"},
	"xdsserver/ca":      {"xdsserver/ads", "xdsserver/gen", "xdsserver/generation", "xdsserver/xdstype", "xdsserver/wire", "xdsserver/debug", "xdsserver/dryrun", "xdsserver/envoyfilter"},
}

func TestDependencyDirection(t *testing.T) {
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	checked := 0
	for tree, bad := range forbidden {
		err := filepath.WalkDir(filepath.Join(root, tree), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") {
				return err
			}
			f, err := parser.ParseFile(fset, p, nil, parser.ImportsOnly)
			if err != nil {
				return err
			}
			checked++
			for _, imp := range f.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				rel, ours := strings.CutPrefix(path, module)
				if !ours || rel == "core/testkit" {
					// core/testkit holds only test habits (polling, the
					// leak check), no domain: every tree's tests share it.
					continue
				}
				for _, b := range bad {
					if rel == b || strings.HasPrefix(rel, b+"/") {
						t.Errorf("%s imports %s: %s must not import %s", p, path, tree, b)
					}
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if checked < 50 {
		t.Fatalf("checked only %d files; is the walk wrong?", checked)
	}
}

// TestTypeURLsInTheTableOnly: the xDS types are declared once, in
// xdsserver/xdstype; outside it only the generators may spell an xDS
// resource type URL. (Tests may.)
func TestTypeURLsInTheTableOnly(t *testing.T) {
	root := filepath.Join("..", "..")
	allowed := []string{filepath.Join(root, "xdsserver", "xdstype"), filepath.Join(root, "xdsserver", "gen")}
	var places []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return err
		}
		for _, a := range allowed {
			if strings.HasPrefix(p, a+string(filepath.Separator)) {
				return nil
			}
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			for _, u := range []string{"envoy.config.listener.v3.Listener\"", "envoy.config.route.v3.RouteConfiguration\"",
				"envoy.config.cluster.v3.Cluster\"", "envoy.config.endpoint.v3.ClusterLoadAssignment\""} {
				if strings.Contains(line, "type.googleapis.com/"+u) {
					places = append(places, p+":"+strconv.Itoa(i+1))
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(places) > 0 {
		t.Errorf("xDS type URLs spelled outside xdsserver/xdstype and the generators: %v", places)
	}
}
