// Package file is the config source for watched YAML directories. It
// reads multi-document YAML and JSON files, watches the directories
// recursively with the sources' one watched-directory primitive
// (sources/dirwatch: editors' rename-and-replace, Kubernetes ConfigMap
// "..data" symlink swaps, deletions, directories that appear later),
// re-reads only what changed, and delivers batches to a store.Sink. A file is all-or-nothing: one bad document rejects the file,
// its problems are reported with file and line, and what it held before
// stays in force until a good version arrives.
//
// It imports core and sources/dirwatch; never xdsserver.
package file

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/store"
	"github.com/baremesh/baremesh/sources/dirwatch"
)

// Options configure a Watcher. Zero values take the defaults.
type Options struct {
	// Dirs are the directories to watch, in precedence order.
	Dirs []string
	// Name names the source in Configs, problems and logs; default "file".
	Name string
	// MaxFileSize, MaxDocuments and MaxNodes are the Limits of one file.
	MaxFileSize  int64
	MaxDocuments int
	MaxNodes     int
	// Coalesce is the quiet period that merges a burst of changes into one
	// update; 0 handles each change at once.
	Coalesce time.Duration
	// MaxCoalesce bounds how long a continuous burst can delay an update;
	// default 1 s.
	MaxCoalesce time.Duration
	// DirPoll is how often a missing directory is looked for; default
	// 250 ms.
	DirPoll time.Duration
	Logger  *slog.Logger
	Metrics *Metrics
}

func (o *Options) setDefaults() {
	if o.Name == "" {
		o.Name = "file"
	}
	l := o.limits()
	o.MaxFileSize, o.MaxDocuments, o.MaxNodes = l.MaxFileSize, l.MaxDocuments, l.MaxNodes
	if o.MaxCoalesce <= 0 {
		o.MaxCoalesce = time.Second
	}
	if o.DirPoll <= 0 {
		o.DirPoll = 250 * time.Millisecond
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

func (o *Options) limits() Limits {
	return Limits{MaxFileSize: o.MaxFileSize, MaxDocuments: o.MaxDocuments, MaxNodes: o.MaxNodes}.WithDefaults()
}

// Watcher watches directories and feeds a Sink. Run it once.
type Watcher struct {
	opts    Options
	sink    store.Sink
	log     *slog.Logger
	dw      *dirwatch.Watcher
	roots   []string
	files   map[string]*fileState // by path
	current map[config.Key]config.Config
	owner   map[config.Key]string // which file holds a key
	dirty   map[string]bool       // paths (files or directories) to re-read
	// dirErrs: the directories that cannot be listed or watched, as last
	// shown on the sink (dirwatch looks at them again every DirPoll).
	dirErrs map[string]dirErr
	// waiting: roots shown as not existing yet.
	waiting map[string]bool
	// created: when each key was first seen (stamp).
	created map[config.Key]time.Time
}

type dirErr struct{ read, watch string }

type fileState struct {
	hash     [32]byte
	good     []config.Config
	problems []store.Problem
	// blocked: rejected only because other files hold its resources.
	blocked bool
}

// New returns a Watcher over opts.Dirs delivering to sink.
func New(opts Options, sink store.Sink) *Watcher {
	opts.setDefaults()
	w := &Watcher{
		opts: opts, sink: sink, log: opts.Logger,
		files: map[string]*fileState{}, current: map[config.Key]config.Config{},
		owner: map[config.Key]string{}, dirty: map[string]bool{},
		dirErrs: map[string]dirErr{}, waiting: map[string]bool{}, created: map[config.Key]time.Time{},
	}
	for _, d := range opts.Dirs {
		w.roots = append(w.roots, filepath.Clean(d))
	}
	return w
}

// Run watches until ctx ends. It delivers the initial state of every
// present directory and then calls Synced; directories that do not exist
// yet are waited for.
func (w *Watcher) Run(ctx context.Context) error {
	dw, err := dirwatch.New(dirwatch.Options{Dirs: w.roots, Depth: dirwatch.Unlimited, Settle: w.opts.Coalesce,
		MaxSettle: w.opts.MaxCoalesce, Poll: w.opts.DirPoll, Ignore: editorTemp})
	if err != nil {
		return fmt.Errorf("file source %s: %w", w.opts.Name, err)
	}
	w.dw = dw
	first := true
	return dw.Run(ctx, func(c dirwatch.Change) {
		w.change(c)
		if first {
			first = false
			w.sink.Synced()
		}
	})
}

// change applies one Change of the directories: roots gone or waited
// for, then the dirty paths re-read, then the directory problems.
func (w *Watcher) change(c dirwatch.Change) {
	for _, g := range c.Gone {
		w.rootGone(g)
	}
	for _, m := range c.Missing {
		if !w.waiting[m] && !slices.Contains(c.Gone, m) && !w.hadFiles(m) {
			w.waiting[m] = true
			w.sink.SetProblems(m, []store.Problem{{Error: "directory does not exist yet; waiting for it", Since: time.Now()}})
		}
	}
	for _, p := range c.Dirty {
		if slices.Contains(w.roots, p) {
			delete(w.waiting, p)
			w.sink.SetProblems(p, nil)
			w.log.Info("watching config directory", "dir", p)
		}
		w.dirty[p] = true
	}
	w.flush()
	w.syncDirProblems()
}

// syncDirProblems shows on the sink what dirwatch says of the
// directories it cannot list or watch, and logs what changed.
func (w *Watcher) syncDirProblems() {
	now := map[string]dirErr{}
	for _, p := range w.dw.Problems() {
		var e dirErr
		if p.Read != nil {
			e.read = fmt.Sprintf("cannot read directory: %v; the config files below it are not loaded", p.Read)
		}
		if p.Watch != nil {
			e.watch = fmt.Sprintf("cannot watch directory: %v; changes below it are not seen", p.Watch)
		}
		now[p.Dir] = e
	}
	for dir, e := range now {
		if w.dirErrs[dir] == e {
			continue
		}
		var ps []store.Problem
		for _, m := range []string{e.read, e.watch} {
			if m != "" {
				ps = append(ps, store.Problem{Error: m, Since: time.Now()})
			}
		}
		w.log.Warn("config directory problem", "dir", dir, "err", ps[0].Error)
		w.sink.SetProblems(dir, ps)
	}
	for dir := range w.dirErrs {
		if _, ok := now[dir]; !ok {
			w.log.Info("config directory readable again", "dir", dir)
			w.sink.SetProblems(dir, nil)
		}
	}
	w.dirErrs = now
}

func (w *Watcher) rootOf(p string) string {
	for _, r := range w.roots {
		if p == r || strings.HasPrefix(p, r+string(filepath.Separator)) {
			return r
		}
	}
	return ""
}

// hadFiles reports whether files below root are held.
func (w *Watcher) hadFiles(root string) bool {
	for p := range w.files {
		if w.rootOf(p) == root {
			return true
		}
	}
	return false
}

// rootGone keeps what root's files held (the directory may be on its
// way back, as with a redeploy) and reports it until the directory
// returns.
func (w *Watcher) rootGone(root string) {
	n := 0
	for p, f := range w.files {
		if w.rootOf(p) == root {
			n += len(f.good)
		}
	}
	w.log.Warn("config directory removed; keeping its resources until it is back", "dir", root, "resources", n)
	w.sink.SetProblems(root, []store.Problem{{Error: fmt.Sprintf("directory removed; keeping its %d resources until it is back", n), Since: time.Now()}})
}

func hidden(name string) bool { return strings.HasPrefix(name, ".") }

func editorTemp(name string) bool {
	return strings.HasSuffix(name, "~") || strings.HasSuffix(name, ".swp") || strings.HasSuffix(name, ".swx") ||
		strings.HasSuffix(name, ".tmp") || name == "4913" || (strings.HasPrefix(name, "#") && strings.HasSuffix(name, "#"))
}

func configFile(name string) bool {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".yaml", ".yml", ".json":
		return !hidden(name) && !editorTemp(name)
	}
	return false
}

// expandDirty turns dirty directories into the files below them, present
// or known, and returns every dirty file, sorted: config files, and
// files held before.
func (w *Watcher) expandDirty() []string {
	set := map[string]bool{}
	for p := range w.dirty {
		fi, err := os.Lstat(p)
		isDir := err == nil && fi.IsDir()
		if !isDir && slices.Contains(w.roots, p) {
			isDir = err == nil && isDirFollowed(p) // a symlinked root
		}
		if isDir || w.isKnownDir(p) {
			for known := range w.files {
				if strings.HasPrefix(known, p+string(filepath.Separator)) {
					set[known] = true
				}
			}
		}
		if isDir {
			w.dw.Walk(p, configFile, func(q string) { set[q] = true })
			continue
		}
		if !w.isKnownDir(p) && (configFile(filepath.Base(p)) || w.files[p] != nil) {
			set[p] = true
		}
	}
	clear(w.dirty)
	out := make([]string, 0, len(set))
	for p := range set {
		if w.rootOf(p) != "" {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

func isDirFollowed(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

func (w *Watcher) isKnownDir(p string) bool {
	for known := range w.files {
		if strings.HasPrefix(known, p+string(filepath.Separator)) {
			return true
		}
	}
	return false
}

// errNoFile marks a file that is gone (or is no longer a regular file).
var errNoFile = errors.New("no such file")
