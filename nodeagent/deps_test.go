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
// over the wire).
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
			if strings.HasPrefix(p, module) && !strings.HasPrefix(p, module+"nodeagent") && p != module+"internal/version" {
				t.Errorf("%s imports %s", path, p)
			}
		}
		return nil
	})
	if err != nil || checked < 10 {
		t.Fatalf("walked %d files: %v", checked, err)
	}
}
