// Package validate is baremeshctl's offline check of config directories:
// the file source's parser and Istio's rules, with the same cross-file
// duplicate rule, and one line per problem.
package validate

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/sources/file"
)

// Main validates paths and prints "file:line: kind/ns/name: reason" per
// problem to stdout. It returns 1 if there is any problem, 2 if a path
// cannot be read at all, else 0.
func Main(paths []string, stdout, stderr io.Writer) int {
	files, err := Files(paths)
	if err != nil {
		fmt.Fprintf(stderr, "baremeshctl: %v\n", err)
		return 2
	}
	problems, resources := 0, 0
	seen := map[config.Key]config.Source{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			fmt.Fprintf(stdout, "%s: %v\n", f, err)
			problems++
			continue
		}
		cfgs, errs := file.Parse(data, f, "validate")
		for _, e := range errs {
			fmt.Fprintln(stdout, e.Error())
			problems++
		}
		for _, c := range cfgs {
			if prev, dup := seen[c.Key()]; dup {
				fmt.Fprintf(stdout, "%s:%d: %s: duplicate: already defined in %s:%d\n", f, c.Source.Line, c.Key(), prev.File, prev.Line)
				problems++
				continue
			}
			seen[c.Key()] = c.Source
			resources++
		}
	}
	fmt.Fprintf(stderr, "%d files, %d resources, %d problems\n", len(files), resources, problems)
	if problems > 0 {
		return 1
	}
	return 0
}

// Files lists the config files under paths as baremeshd's file source
// reads them: .yaml, .yml and .json, hidden files and directories left
// out, sorted. A path that cannot be read is an error.
func Files(paths []string) ([]string, error) {
	var files []string
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !fi.IsDir() {
			files = append(files, p)
			continue
		}
		_ = filepath.WalkDir(p, func(q string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if d.IsDir() && q != p && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			switch strings.ToLower(filepath.Ext(q)) {
			case ".yaml", ".yml", ".json":
				if !d.IsDir() && !strings.HasPrefix(d.Name(), ".") {
					files = append(files, q)
				}
			}
			return nil
		})
	}
	sort.Strings(files)
	return files, nil
}
