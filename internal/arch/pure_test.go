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

// pure are the translation packages (README "Layout": a snapshot in,
// values out); their non-test files may not import what does I/O.
var pure = []string{"core/model", "core/gatewayapi", "core/credentials", "xdsserver/gen"}

// pureExempt are test support under a pure tree (they read testdata).
var pureExempt = []string{"xdsserver/gen/gentest", "xdsserver/gen/bench"}

// impure are imports that read files, run processes or open connections.
var impure = []string{"os", "os/exec", "google.golang.org/grpc", "github.com/fsnotify/fsnotify",
	"github.com/hashicorp/memberlist", "k8s.io/client-go"}

func TestTranslationIsPure(t *testing.T) {
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	checked := 0
	for _, tree := range pure {
		err := filepath.WalkDir(filepath.Join(root, tree), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			if d.IsDir() {
				for _, e := range pureExempt {
					if rel == e {
						return filepath.SkipDir
					}
				}
				return nil
			}
			if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(fset, p, nil, parser.ImportsOnly)
			if err != nil {
				return err
			}
			checked++
			for _, imp := range f.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				for _, bad := range impure {
					if path == bad || strings.HasPrefix(path, bad+"/") {
						t.Errorf("%s imports %s: translation (%s) does no I/O", p, path, tree)
					}
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if checked < 30 {
		t.Fatalf("checked only %d files; is the walk wrong?", checked)
	}
}
