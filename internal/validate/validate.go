// Package validate is baremeshctl's offline check of config directories:
// the file source's parser and Istio's rules, with the same cross-file
// duplicate rule, and one line per problem.
package validate

import (
	"fmt"
	"io"
	"os"
	"sort"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/sources/file"
)

// Main validates paths and prints "file:line: kind/ns/name: reason" per
// problem to stdout. It reads as the daemon does: the same files (only
// regular files; FIFOs, devices and sockets are problems and are never
// read), the same limits (lim; zero fields take the daemon's defaults),
// and unreadable directories are problems. It returns 1 if there is any
// problem, 2 if a path cannot be read at all, else 0.
func Main(paths []string, lim file.Limits, stdout, stderr io.Writer) int {
	lim = lim.WithDefaults()
	var files []string
	problems, resources := 0, 0
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			fmt.Fprintf(stderr, "baremeshctl: %v\n", err)
			return 2
		}
		if !fi.IsDir() {
			files = append(files, p)
			continue
		}
		file.Walk(p, func(q string) { files = append(files, q) }, func(dir string, err error) {
			fmt.Fprintf(stdout, "%s: cannot read directory: %v; the config files below it are not loaded\n", dir, err)
			problems++
		})
	}
	sort.Strings(files)
	seen := map[config.Key]config.Source{}
	for _, f := range files {
		data, err := file.ReadFile(f, lim.MaxFileSize)
		if err != nil {
			fmt.Fprintf(stdout, "%s: %v\n", f, err)
			problems++
			continue
		}
		cfgs, errs := file.ParseLimits(data, f, "validate", lim)
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
// reads them (file.Walk: .yaml, .yml and .json, hidden files and
// directories left out), sorted. A path that cannot be read is an error;
// directories below it that cannot be listed are skipped (Main reports
// them). Read the files with ReadFile, never os.ReadFile: a FIFO or a
// device must not block or flood the reader.
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
		file.Walk(p, func(q string) { files = append(files, q) }, func(string, error) {})
	}
	sort.Strings(files)
	return files, nil
}

// ReadFile reads one config file as the daemon does, with its default
// size limit: only regular files, never blocking.
func ReadFile(path string) ([]byte, error) {
	return file.ReadFile(path, file.DefaultMaxFileSize)
}
