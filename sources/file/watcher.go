// Package file is the config source for watched YAML directories. It
// reads multi-document YAML and JSON files, watches the directories
// recursively with fsnotify (editors' rename-and-replace, Kubernetes
// ConfigMap "..data" symlink swaps, deletions, directories that appear
// later), re-reads only what changed, and delivers batches to a
// store.Sink. A file is all-or-nothing: one bad document rejects the file,
// its problems are reported with file and line, and what it held before
// stays in force until a good version arrives.
//
// It imports core only; never xdsserver.
package file

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/store"
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
	fsw     *fsnotify.Watcher
	roots   []*root
	files   map[string]*fileState // by path
	current map[config.Key]config.Config
	owner   map[config.Key]string // which file holds a key
	watched map[string]bool       // directories with an fsnotify watch
	dirty   map[string]bool       // paths (files or directories) to re-read
	// dirErrs: directories that cannot be listed or watched, by path;
	// each is a problem, retried on every DirPoll tick.
	dirErrs map[string]*dirErr
	// created: when each key was first seen (stamp).
	created map[config.Key]time.Time
}

type dirErr struct{ read, watch string }

type root struct {
	dir     string
	present bool
}

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
		owner: map[config.Key]string{}, watched: map[string]bool{}, dirty: map[string]bool{},
		dirErrs: map[string]*dirErr{}, created: map[config.Key]time.Time{},
	}
	for _, d := range opts.Dirs {
		w.roots = append(w.roots, &root{dir: filepath.Clean(d)})
	}
	return w
}

// Run watches until ctx ends. It delivers the initial state of every
// present directory and then calls Synced; directories that do not exist
// yet are waited for.
func (w *Watcher) Run(ctx context.Context) error {
	fsw, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("file source %s: %w", w.opts.Name, err)
	}
	defer fsw.Close()
	w.fsw = fsw
	for _, r := range w.roots {
		w.checkRoot(r)
	}
	w.flush()
	w.sink.Synced()

	var (
		quiet, limit <-chan time.Time
		poll         *time.Ticker
	)
	poll = time.NewTicker(w.opts.DirPoll)
	defer poll.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-fsw.Events:
			if !ok {
				return nil
			}
			w.handle(ev)
			if len(w.dirty) == 0 {
				continue
			}
			if w.opts.Coalesce <= 0 {
				w.drainQueued()
				w.flush()
				continue
			}
			quiet = time.After(w.opts.Coalesce)
			if limit == nil {
				limit = time.After(w.opts.MaxCoalesce)
			}
		case err := <-fsw.Errors:
			w.log.Warn("file watcher error", "err", err)
		case <-quiet:
			w.flush()
			quiet, limit = nil, nil
		case <-limit:
			w.flush()
			quiet, limit = nil, nil
		case <-poll.C:
			changed := w.retryDirs()
			for _, r := range w.roots {
				if !r.present {
					changed = w.checkRoot(r) || changed
				}
			}
			if changed {
				w.flush()
			}
		}
	}
}

// drainQueued takes the events already waiting, so one burst that the
// kernel delivered together is one update even with coalescing off.
func (w *Watcher) drainQueued() {
	for {
		select {
		case ev := <-w.fsw.Events:
			w.handle(ev)
		default:
			return
		}
	}
}

// checkRoot starts watching r when its directory exists; it reports
// whether r became present.
func (w *Watcher) checkRoot(r *root) bool {
	fi, err := os.Stat(r.dir)
	if err != nil || !fi.IsDir() {
		if !r.present {
			w.sink.SetProblems(r.dir, []store.Problem{{Error: "directory does not exist yet; waiting for it", Since: time.Now()}})
		}
		return false
	}
	r.present = true
	w.sink.SetProblems(r.dir, nil)
	w.addTree(r.dir)
	w.dirty[r.dir] = true
	w.log.Info("watching config directory", "dir", r.dir)
	return true
}

// addTree adds fsnotify watches on dir and every non-hidden directory
// below it. Symlinked directories are not followed (no loops).
func (w *Watcher) addTree(dir string) {
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() {
			if p != dir && hidden(d.Name()) {
				return filepath.SkipDir
			}
			if !w.watched[p] {
				if err := w.fsw.Add(p); err != nil {
					w.setDirErr(p, false, fmt.Sprintf("cannot watch directory: %v; changes below it are not seen", unwrapPath(err)))
					return nil
				}
				w.setDirErr(p, false, "")
				w.watched[p] = true
			}
		}
		return nil
	})
}

func (w *Watcher) rootOf(p string) *root {
	for _, r := range w.roots {
		if p == r.dir || strings.HasPrefix(p, r.dir+string(filepath.Separator)) {
			return r
		}
	}
	return nil
}

// handle turns one fsnotify event into dirty paths.
func (w *Watcher) handle(ev fsnotify.Event) {
	p := filepath.Clean(ev.Name)
	if ev.Op == fsnotify.Chmod {
		// A directory's mode changed: it may have become readable, or
		// unreadable.
		if fi, err := os.Lstat(p); err == nil && fi.IsDir() && !hidden(filepath.Base(p)) && w.rootOf(p) != nil {
			w.addTree(p)
			w.dirty[p] = true
		}
		return
	}
	for _, r := range w.roots {
		if p == r.dir && ev.Has(fsnotify.Remove|fsnotify.Rename) {
			w.rootGone(r)
			return
		}
	}
	base := filepath.Base(p)
	if strings.HasPrefix(base, "..") {
		// A Kubernetes ConfigMap mount swapped its ..data symlink: every
		// file of the directory may have changed.
		w.dirty[filepath.Dir(p)] = true
		return
	}
	if hidden(base) || editorTemp(base) {
		return
	}
	if w.watched[p] && ev.Has(fsnotify.Remove|fsnotify.Rename) {
		delete(w.watched, p)
		w.dirty[p] = true
		return
	}
	if ev.Has(fsnotify.Create) {
		if fi, err := os.Lstat(p); err == nil && fi.IsDir() {
			w.addTree(p)
			w.dirty[p] = true
			return
		}
	}
	if configFile(base) {
		w.dirty[p] = true
	}
}

// rootGone keeps what r's files held (the directory may be on its way
// back, as with a redeploy) and reports it until the directory returns.
func (w *Watcher) rootGone(r *root) {
	r.present = false
	for d := range w.watched {
		if w.rootOf(d) == r {
			delete(w.watched, d)
		}
	}
	n := 0
	for p, f := range w.files {
		if w.rootOf(p) == r {
			n += len(f.good)
		}
	}
	w.log.Warn("config directory removed; keeping its resources until it is back", "dir", r.dir, "resources", n)
	w.sink.SetProblems(r.dir, []store.Problem{{Error: fmt.Sprintf("directory removed; keeping its %d resources until it is back", n), Since: time.Now()}})
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
// or known, and returns every dirty file, sorted.
func (w *Watcher) expandDirty() []string {
	set := map[string]bool{}
	for p := range w.dirty {
		fi, err := os.Lstat(p)
		isDir := err == nil && fi.IsDir()
		if isDir || w.isKnownDir(p) {
			for known := range w.files {
				if strings.HasPrefix(known, p+string(filepath.Separator)) {
					set[known] = true
				}
			}
		}
		if isDir {
			failed := map[string]bool{}
			Walk(p, func(q string) { set[q] = true }, func(q string, err error) {
				failed[q] = true
				w.setDirErr(q, true, fmt.Sprintf("cannot read directory: %v; the config files below it are not loaded", err))
			})
			for q := range w.dirErrs {
				if !failed[q] && (q == p || strings.HasPrefix(q, p+string(filepath.Separator))) {
					w.setDirErr(q, true, "")
				}
			}
			continue
		}
		if !w.isKnownDir(p) {
			set[p] = true
		}
	}
	clear(w.dirty)
	out := make([]string, 0, len(set))
	for p := range set {
		if r := w.rootOf(p); r != nil && r.present {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
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
