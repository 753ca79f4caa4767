// Package arch checks the dependency direction of the repository's trees
// (STYLE.md): core imports nothing of ours outside core; sources and
// xdsserver import core, never each other; nodeagent stands alone.
package arch

import (
	"go/parser"
	"go/token"
	"io/fs"
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
				if !ours {
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
