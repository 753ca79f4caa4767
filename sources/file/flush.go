package file

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/store"
)

// flush re-reads every dirty file and delivers the result as one batch.
func (w *Watcher) flush() {
	// (A root removed with everything in it, rm -rf, shows first as file
	// removals: dirwatch reports it Gone instead, so those files stay.)
	paths := w.expandDirty()
	if len(paths) == 0 {
		return
	}
	touched := map[config.Key]bool{}
	var retry []string
	for i, ld := range w.loadAll(paths) {
		if conflict := w.apply(paths[i], ld, touched); conflict {
			retry = append(retry, paths[i])
		}
	}
	// A resource moved from one file to another in the same burst may be
	// claimed before it is released; a second pass settles that.
	// Files held back by a duplicate may be free now that others changed.
	for p, f := range w.files {
		if f.blocked && !slices.Contains(retry, p) {
			retry = append(retry, p)
		}
	}
	slices.Sort(retry)
	for _, p := range retry {
		w.files[p].hash = [32]byte{}
		w.reload(p, touched)
	}
	var ups []config.Config
	var dels []config.Key
	now := time.Now()
	for k := range touched {
		if c, ok := w.current[k]; ok {
			ups = append(ups, w.stamp(c, now))
		} else {
			delete(w.created, k)
			dels = append(dels, k)
		}
	}
	w.opts.Metrics.observe(w)
	if len(ups)+len(dels) > 0 {
		w.sink.Update(ups, dels)
	}
}

// loaded is one file read and parsed, not yet applied.
type loaded struct {
	err       error
	hash      [32]byte
	unchanged bool // same bytes as the last good read: nothing to do
	cfgs      []config.Config
	docErrs   []*config.DocError
}

// load reads and parses one file. It only reads the watcher's state, so
// loads of different files may run in parallel.
func (w *Watcher) load(p string) loaded {
	data, err := w.read(p)
	if err != nil {
		return loaded{err: err}
	}
	ld := loaded{hash: sha256.Sum256(data)}
	if f := w.files[p]; f != nil && ld.hash == f.hash && len(f.problems) == 0 {
		ld.unchanged = true // re-read of an unchanged file
		return ld
	}
	ld.cfgs, ld.docErrs = ParseLimits(data, p, w.opts.Name, w.opts.limits())
	return ld
}

// loadAll loads paths, in parallel when there are many (as at start-up):
// reading and parsing is most of the cost, and each file is on its own.
func (w *Watcher) loadAll(paths []string) []loaded {
	out := make([]loaded, len(paths))
	workers := min(runtime.GOMAXPROCS(0), len(paths)/8+1)
	if workers <= 1 {
		for i, p := range paths {
			out[i] = w.load(p)
		}
		return out
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < len(paths); i = int(next.Add(1) - 1) {
				out[i] = w.load(paths[i])
			}
		}()
	}
	wg.Wait()
	return out
}

// reload reads one file and applies it.
func (w *Watcher) reload(p string, touched map[config.Key]bool) (conflict bool) {
	return w.apply(p, w.load(p), touched)
}

// apply applies one loaded file to the watcher's state, recording the
// keys whose content may have changed. It reports whether the file was
// rejected only because another file holds one of its resources.
func (w *Watcher) apply(p string, ld loaded, touched map[config.Key]bool) (conflict bool) {
	err := ld.err
	f := w.files[p]
	if errors.Is(err, errNoFile) {
		if f != nil {
			w.setGood(p, f, nil, touched)
			delete(w.files, p)
			w.sink.SetProblems(p, nil)
			w.log.Info("config file removed", "file", p, "resources", len(f.good))
		}
		return false
	}
	if f == nil {
		f = &fileState{}
		w.files[p] = f
	}
	if err != nil {
		w.reject(p, f, []*config.DocError{{File: p, Err: err}})
		return false
	}
	if ld.unchanged {
		return false
	}
	f.hash = ld.hash
	cfgs, docErrs := ld.cfgs, ld.docErrs
	for _, c := range cfgs {
		if other, held := w.owner[c.Key()]; held && other != p {
			line := 0
			if oc, ok := w.current[c.Key()]; ok {
				line = oc.Source.Line
			}
			docErrs = append(docErrs, &config.DocError{File: p, Line: c.Source.Line, Resource: c.Key().String(),
				Err: fmt.Errorf("%w: %w: already defined in %s:%d", config.ErrInvalid, errDuplicate, other, line)})
			conflict = true
		}
	}
	f.blocked = false
	if len(docErrs) > 0 {
		w.reject(p, f, docErrs)
		f.blocked = conflict && len(docErrs) == countDup(docErrs)
		return f.blocked
	}
	if len(f.problems) > 0 {
		w.log.Info("config file accepted again", "file", p, "resources", len(cfgs))
	}
	f.problems = nil
	w.sink.SetProblems(p, nil)
	w.setGood(p, f, cfgs, touched)
	return false
}

func countDup(errs []*config.DocError) int {
	n := 0
	for _, e := range errs {
		if errors.Is(e.Err, errDuplicate) {
			n++
		}
	}
	return n
}

// errDuplicate marks a resource another file already holds.
var errDuplicate = errors.New("duplicate")

// setGood replaces what file p holds with cfgs.
func (w *Watcher) setGood(p string, f *fileState, cfgs []config.Config, touched map[config.Key]bool) {
	for _, c := range f.good {
		k := c.Key()
		if w.owner[k] == p {
			delete(w.owner, k)
			delete(w.current, k)
			touched[k] = true
		}
	}
	for _, c := range cfgs {
		k := c.Key()
		w.owner[k] = p
		w.current[k] = c
		touched[k] = true
	}
	f.good = cfgs
}

// reject records a file's problems; what it held before stays.
func (w *Watcher) reject(p string, f *fileState, errs []*config.DocError) {
	now := time.Now()
	f.problems = make([]store.Problem, len(errs))
	for i, e := range errs {
		f.problems[i] = store.Problem{Line: e.Line, Resource: e.Resource, Error: e.Err.Error(), Since: now}
		w.log.Warn("config file rejected; keeping its last good resources", "err", e.Error(), "kept", len(f.good))
	}
	w.opts.Metrics.rejected(w.opts.Name)
	w.sink.SetProblems(p, f.problems)
}

// read returns a file's bytes (see ReadFile). A file that is gone gives
// errNoFile.
func (w *Watcher) read(p string) ([]byte, error) {
	data, err := ReadFile(p, w.opts.MaxFileSize)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errNoFile
	}
	return data, err
}

// stamp gives c, when its document sets no metadata.creationTimestamp,
// the time this watcher first saw its key: kept across edits and
// re-reads, and a move to another file, while some file holds the key
// (as Kubernetes keeps an object's creationTimestamp across updates);
// forgotten when none does. Files carry no creation time of their own
// (a file's mtime moves with every edit), and MCP subscribers (istiod)
// order conflicting rules by it.
func (w *Watcher) stamp(c config.Config, now time.Time) config.Config {
	if !c.CreationTime.IsZero() {
		return c
	}
	k := c.Key()
	t, ok := w.created[k]
	if !ok {
		t = now
		w.created[k] = t
	}
	c.CreationTime = t
	return c
}
