// Package dirwatch is the one watched-directory primitive of the
// sources that read the host's files: the config directories
// (sources/file), the mesh config file (file.WatchFile), the gateway
// credentials (sources/credentials) and the kubeconfigs (sources/kube).
// A Watcher
//   - watches before it reads: every watch is in place before the read
//     it asks for, so a change is either in what the read sees or an
//     event after it (the race fixed in 010ad06 and a46bcdb);
//   - settles: a burst of events (an editor's write, a rename-and-replace,
//     a Kubernetes ConfigMap "..data" swap) is one Change, after a quiet
//     period and at most MaxSettle after the first event;
//   - looks again, every Poll, for what it could not watch: a directory
//     that does not exist yet or was removed, one it may not watch or
//     list (permissions); and, if asked, rescans everything every Rescan
//     in case an event was lost;
//   - watches each root's parent, so a root that appears, is removed, or
//     is replaced (a symlink swapped to another directory, as a mounted
//     ConfigMap's) is seen at once;
//   - reads hardened (ReadFile, Walk): only regular files, never blocking
//     on a FIFO or device, a size limit, symlinked directories not
//     followed, unreadable directories named.
//
// It lives in sources, not core, because reading the host's directories
// is ingestion: core must not import sources, and no core package reads
// files a user edits; the daemon reaches it through the sources it
// wires. It imports nothing of ours.
package dirwatch

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Unlimited is the Depth of a watch over a whole tree.
const Unlimited = -1

// Options configure a Watcher. Zero values take the defaults.
type Options struct {
	// Dirs are the watched directories (roots); they need not exist yet.
	Dirs []string
	// Depth is how many levels of directories below a root are watched
	// too: 0 the root only, 1 its subdirectories, Unlimited the whole
	// tree. Hidden directories (".name") are never watched.
	Depth int
	// Settle is the quiet period that makes a burst one Change; 0
	// delivers at once what the kernel has queued.
	Settle time.Duration
	// MaxSettle bounds how long a continuous burst delays a Change;
	// default 1 s.
	MaxSettle time.Duration
	// Poll is how often missing roots and directories that could not be
	// watched or listed are looked at again; default 250 ms.
	Poll time.Duration
	// Rescan, if set, asks for a full read (Change.All) that often.
	Rescan time.Duration
	// Ignore names files whose events are of no interest (editors'
	// temporary files). Hidden names are always ignored, but for names
	// starting with ".." (a ConfigMap's "..data" swap), which mark their
	// directory changed.
	Ignore func(name string) bool
}

// Change is what changed since the last Change. The first one has All.
type Change struct {
	// All asks for everything to be read again: the first Change, a
	// rescan, an event the kernel dropped.
	All bool
	// Dirty are the paths to read again, sorted: files (present or gone)
	// and directories whose whole content may have changed (created,
	// replaced, readable again, a "..data" swap, a root that appeared).
	Dirty []string
	// Gone are the roots removed since the last Change (watched again
	// once they are back, then Dirty).
	Gone []string
	// Missing are the roots that do not exist now.
	Missing []string
}

// Problem is a directory a Watcher cannot watch or a Walk cannot list,
// looked at again every Poll.
type Problem struct {
	Dir string
	// Watch is the watch error, Read the listing error (nil: none).
	Watch, Read error
}

// Watcher watches Options.Dirs. Make it with New; Run it once.
type Watcher struct {
	o        Options
	fsw      *fsnotify.Watcher
	roots    []*root
	watched  map[string]bool
	problems map[string]*Problem
	dirty    map[string]bool
	gone     []string
	all      bool
}

type root struct {
	dir     string
	present bool
}

// New makes a Watcher; nothing is watched before Run.
func New(o Options) (*Watcher, error) {
	if o.MaxSettle <= 0 {
		o.MaxSettle = time.Second
	}
	if o.Poll <= 0 {
		o.Poll = 250 * time.Millisecond
	}
	fsw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", strings.Join(o.Dirs, ", "), err)
	}
	w := &Watcher{o: o, fsw: fsw, watched: map[string]bool{}, problems: map[string]*Problem{}, dirty: map[string]bool{}}
	for _, d := range o.Dirs {
		w.roots = append(w.roots, &root{dir: filepath.Clean(d)})
	}
	return w, nil
}

// Run watches until ctx ends, calling fn with every Change on its own
// goroutine (one at a time; fn may call Walk and Problems). The watches
// of the first Change are in place before fn is called.
func (w *Watcher) Run(ctx context.Context, fn func(Change)) error {
	defer w.fsw.Close()
	for _, r := range w.roots {
		_ = w.fsw.Add(filepath.Dir(r.dir)) // best effort: Poll finds a root whose parent is missing
		w.checkRoot(r)
	}
	w.all = true
	w.deliver(fn)
	poll := time.NewTicker(w.o.Poll)
	defer poll.Stop()
	var rescan <-chan time.Time
	if w.o.Rescan > 0 {
		t := time.NewTicker(w.o.Rescan)
		defer t.Stop()
		rescan = t.C
	}
	var quiet, limit <-chan time.Time
	settle := func() {
		if !w.pending() {
			return
		}
		if w.o.Settle <= 0 {
			w.drainQueued()
			w.deliver(fn)
			return
		}
		quiet = time.After(w.o.Settle)
		if limit == nil {
			limit = time.After(w.o.MaxSettle)
		}
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.fsw.Events:
			if !ok {
				return nil
			}
			w.handle(ev)
			settle()
		case _, ok := <-w.fsw.Errors:
			if !ok {
				return nil
			}
			w.all = true // an overflow: events were dropped
			settle()
		case <-quiet:
			quiet, limit = nil, nil
			w.deliver(fn)
		case <-limit:
			quiet, limit = nil, nil
			w.deliver(fn)
		case <-poll.C:
			w.poll()
			if w.pending() && quiet == nil {
				w.deliver(fn)
			}
		case <-rescan:
			w.all = true
			settle()
		}
	}
}

func (w *Watcher) pending() bool { return w.all || len(w.dirty) > 0 || len(w.gone) > 0 }

// drainQueued takes the events already waiting, so one burst the kernel
// delivered together is one Change even without settling.
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

func (w *Watcher) deliver(fn func(Change)) {
	// A root removed with everything in it (rm -rf) shows first as file
	// removals, before its own event: it is gone, not emptied.
	for _, r := range w.roots {
		if _, err := os.Stat(r.dir); r.present && err != nil {
			w.rootGone(r)
		}
	}
	c := Change{All: w.all, Gone: w.gone}
	for p := range w.dirty {
		if r := w.rootOf(p); r != nil && r.present {
			c.Dirty = append(c.Dirty, p)
		}
	}
	slices.Sort(c.Dirty)
	for _, r := range w.roots {
		if !r.present {
			c.Missing = append(c.Missing, r.dir)
		}
	}
	w.all, w.gone = false, nil
	clear(w.dirty)
	fn(c)
}

// Problems returns the directories that cannot be watched or listed now,
// sorted.
func (w *Watcher) Problems() []Problem {
	out := make([]Problem, 0, len(w.problems))
	for _, p := range w.problems {
		out = append(out, *p)
	}
	slices.SortFunc(out, func(a, b Problem) int { return strings.Compare(a.Dir, b.Dir) })
	return out
}

// setProblem records (err != nil) or clears a directory's watch or read
// problem.
func (w *Watcher) setProblem(dir string, watch bool, err error) {
	p := w.problems[dir]
	if p == nil {
		if err == nil {
			return
		}
		p = &Problem{Dir: dir}
		w.problems[dir] = p
	}
	if watch {
		p.Watch = err
	} else {
		p.Read = err
	}
	if p.Watch == nil && p.Read == nil {
		delete(w.problems, dir)
	}
}
