package dirwatch

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/fsnotify/fsnotify"
)

// checkRoot watches r (and its tree, to Depth) when its directory
// exists, and marks it dirty; else r is missing.
func (w *Watcher) checkRoot(r *root) {
	fi, err := os.Stat(r.dir)
	if err != nil || !fi.IsDir() {
		r.present = false
		return
	}
	r.present = true
	w.addTree(r.dir)
	w.dirty[r.dir] = true
}

// addTree watches dir and the directories below it to Depth, hidden
// ones left out and symlinked ones not followed (no loops); a directory
// that cannot be watched is a Problem, retried every Poll.
func (w *Watcher) addTree(dir string) {
	r := w.rootOf(dir)
	if r == nil {
		return
	}
	// The trailing separator follows a symlinked root (a mounted
	// ConfigMap's); symlinks below it are not followed.
	_ = filepath.WalkDir(dir+string(filepath.Separator), func(p string, d fs.DirEntry, err error) error {
		p = filepath.Clean(p)
		if err != nil {
			return nil
		}
		if d.Type()&fs.ModeSymlink != 0 && w.o.Depth >= 0 && w.within(r, p) && !Hidden(d.Name()) {
			// A symlinked directory inside a bounded depth (a credential
			// linked in): watched, not descended.
			if fi, err := os.Stat(p); err == nil && fi.IsDir() && !w.watched[p] {
				if w.fsw.Add(p) == nil {
					w.watched[p] = true
				}
			}
			return nil
		}
		if !d.IsDir() {
			return nil
		}
		if p != r.dir && Hidden(d.Name()) {
			return filepath.SkipDir
		}
		if !w.within(r, p) {
			return filepath.SkipDir
		}
		if !w.watched[p] {
			if err := w.fsw.Add(p); err != nil {
				w.setProblem(p, true, unwrapPath(err))
				return nil
			}
			w.setProblem(p, true, nil)
			w.watched[p] = true
		}
		if p != r.dir && w.o.Depth >= 0 && depth(r.dir, p) >= w.o.Depth {
			return filepath.SkipDir
		}
		return nil
	})
}

// within reports whether directory p of root r is inside the watched
// depth.
func (w *Watcher) within(r *root, p string) bool {
	return w.o.Depth < 0 || depth(r.dir, p) <= w.o.Depth
}

func depth(root, p string) int {
	if p == root {
		return 0
	}
	return strings.Count(strings.TrimPrefix(p, root), string(filepath.Separator))
}

// rootOf returns the root p is in (or is), nil for none.
func (w *Watcher) rootOf(p string) *root {
	for _, r := range w.roots {
		if p == r.dir || strings.HasPrefix(p, r.dir+string(filepath.Separator)) {
			return r
		}
	}
	return nil
}

func (w *Watcher) rootNamed(p string) *root {
	for _, r := range w.roots {
		if p == r.dir {
			return r
		}
	}
	return nil
}

// handle turns one event into dirty paths.
func (w *Watcher) handle(ev fsnotify.Event) {
	p := filepath.Clean(ev.Name)
	if r := w.rootNamed(p); r != nil && ev.Op != fsnotify.Chmod {
		// From the root's own watch or its parent's.
		switch {
		case ev.Has(fsnotify.Remove | fsnotify.Rename):
			if r.present {
				w.rootGone(r)
			}
		case ev.Has(fsnotify.Create):
			// Appeared, or replaced (renamed over, a symlink swapped): the
			// new directory is watched, then read.
			w.unwatchTree(r.dir)
			w.checkRoot(r)
		}
		return
	}
	r := w.rootOf(p)
	if r == nil || !r.present {
		return // the parent's other entries
	}
	base := filepath.Base(p)
	if ev.Op == fsnotify.Chmod {
		// A directory's mode changed: it may have become readable (or
		// watchable), or not.
		if fi, err := os.Lstat(p); err == nil && fi.IsDir() && (p == r.dir || !Hidden(base)) && w.within(r, p) {
			w.addTree(p)
			w.dirty[p] = true
		}
		return
	}
	if strings.HasPrefix(base, "..") {
		// A Kubernetes ConfigMap mount swapped its ..data symlink: every
		// file of the directory may have changed.
		w.dirty[filepath.Dir(p)] = true
		return
	}
	if Hidden(base) || (w.o.Ignore != nil && w.o.Ignore(base)) {
		return
	}
	if w.watched[p] && ev.Has(fsnotify.Remove|fsnotify.Rename) {
		w.unwatchTree(p)
		w.dirty[p] = true
		return
	}
	if ev.Has(fsnotify.Create) {
		if fi, err := os.Lstat(p); err == nil && fi.IsDir() {
			if w.within(r, p) {
				w.addTree(p) // before the read the Change asks for
			}
			w.dirty[p] = true
			return
		}
	}
	w.dirty[p] = true
}

// unwatchTree forgets the watches at and below dir (the kernel dropped
// them with the directory).
func (w *Watcher) unwatchTree(dir string) {
	for d := range w.watched {
		if d == dir || strings.HasPrefix(d, dir+string(filepath.Separator)) {
			delete(w.watched, d)
			_ = w.fsw.Remove(d)
		}
	}
}

// rootGone records that r was removed; Poll (or its parent's watch)
// sees it come back.
func (w *Watcher) rootGone(r *root) {
	r.present = false
	w.unwatchTree(r.dir)
	for d := range w.problems {
		if d == r.dir || strings.HasPrefix(d, r.dir+string(filepath.Separator)) {
			delete(w.problems, d)
		}
	}
	w.gone = append(w.gone, r.dir)
}

// poll looks for missing roots and at the directories with problems:
// those that can now be watched or listed are dirty.
func (w *Watcher) poll() {
	for _, r := range w.roots {
		if _, err := os.Stat(r.dir); r.present && err != nil {
			// Removed with everything in it (rm -rf) and the event not
			// seen yet, or its parent not watchable.
			w.rootGone(r)
		}
		if !r.present {
			_ = w.fsw.Add(filepath.Dir(r.dir))
			w.checkRoot(r)
		}
	}
	for d, pr := range w.problems {
		if fi, err := os.Lstat(d); err != nil || !fi.IsDir() || w.rootOf(d) == nil {
			delete(w.problems, d)
			continue
		}
		if pr.Watch != nil {
			w.addTree(d)
			if w.watched[d] {
				w.dirty[d] = true // changes may have been missed
			}
		}
		if pr.Read != nil {
			if fh, err := os.Open(d); err == nil {
				fh.Close()
				w.dirty[d] = true // Walk clears the problem
			}
		}
	}
}

// Hidden reports a hidden name (".name"): never config, never watched.
func Hidden(name string) bool { return strings.HasPrefix(name, ".") }
