package nodeagent

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImportBoundary: nodeagent imports nothing of this module outside
// nodeagent except internal/version (it talks to the control plane only
// over the wire); its tests may also use core/testkit, the module's one
// poll helper and leak check, which holds test habits and no domain.
func TestImportBoundary(t *testing.T) {
	const module = "github.com/baremesh/baremesh/"
	checked := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		checked++
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			testkit := strings.HasSuffix(path, "_test.go") && p == module+"core/testkit"
			if strings.HasPrefix(p, module) && !strings.HasPrefix(p, module+"nodeagent") && p != module+"internal/version" && !testkit {
				t.Errorf("%s imports %s", path, p)
			}
		}
		return nil
	})
	if err != nil || checked < 10 {
		t.Fatalf("walked %d files: %v", checked, err)
	}
}
