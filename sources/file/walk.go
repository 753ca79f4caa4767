package file

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/baremesh/baremesh/core/store"
)

// Walk calls file for every config file below dir (or dir itself when it
// is a config file), skipping hidden directories and not following
// symlinked directories, and unreadable for every directory it cannot
// list, whose files are then missing. Both the watcher and baremeshctl
// validate walk with it, so they see the same files.
func Walk(dir string, file func(path string), unreadable func(dir string, err error)) {
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if d == nil || d.IsDir() {
				var pe *fs.PathError
				if errors.As(err, &pe) {
					err = pe.Err
				}
				unreadable(p, err)
			}
			return nil
		}
		if d.IsDir() {
			if p != dir && hidden(d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if configFile(d.Name()) {
			file(p)
		}
		return nil
	})
}

// setDirErr records (msg != "") or clears a directory's read or watch
// problem and shows what is left of both.
func (w *Watcher) setDirErr(dir string, read bool, msg string) {
	e := w.dirErrs[dir]
	if e == nil {
		if msg == "" {
			return
		}
		e = &dirErr{}
		w.dirErrs[dir] = e
	}
	old := *e
	if read {
		e.read = msg
	} else {
		e.watch = msg
	}
	if *e == old {
		return
	}
	var ps []store.Problem
	for _, m := range []string{e.read, e.watch} {
		if m != "" {
			ps = append(ps, store.Problem{Error: m, Since: time.Now()})
		}
	}
	if msg != "" {
		w.log.Warn("config directory problem", "dir", dir, "err", msg)
	} else {
		w.log.Info("config directory readable again", "dir", dir)
	}
	if len(ps) == 0 {
		delete(w.dirErrs, dir)
	}
	w.sink.SetProblems(dir, ps)
}

// retryDirs looks again at the directories with problems and marks those
// that can now be read dirty; it reports whether there are any.
func (w *Watcher) retryDirs() bool {
	for d, e := range w.dirErrs {
		if fi, err := os.Lstat(d); err != nil || !fi.IsDir() || w.rootOf(d) == nil {
			w.setDirErr(d, true, "")
			w.setDirErr(d, false, "")
			continue
		}
		if e.watch != "" {
			w.addTree(d)
			if e.watch == "" {
				w.dirty[d] = true // changes may have been missed
			}
		}
		if e.read != "" {
			if fh, err := os.Open(d); err == nil {
				fh.Close()
				w.dirty[d] = true
			}
		}
	}
	return len(w.dirty) > 0
}

func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
