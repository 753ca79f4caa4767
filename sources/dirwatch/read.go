package dirwatch

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// ErrNotRegular marks a path that is not a regular file (after following
// symlinks): a FIFO, a device, a socket or a directory. Such a path is
// never read: a FIFO would block the reader and a device may never end.
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge marks a file over the size limit.
var ErrTooLarge = errors.New("over the size limit")

// sizeError is an ErrTooLarge that says the sizes.
type sizeError struct{ msg string }

func (e sizeError) Error() string        { return e.msg }
func (e sizeError) Is(target error) bool { return target == ErrTooLarge }

// ReadFile reads a file of at most maxSize bytes without ever blocking
// on what is not a regular file: it stats first, opens with O_NONBLOCK
// (a FIFO swapped in after the stat does not block the open) and checks
// the open file again. A missing file (or a dangling symlink) gives an
// error that wraps fs.ErrNotExist; a FIFO, device, socket or directory
// one that wraps ErrNotRegular and names what it is; an oversize file
// one that wraps ErrTooLarge and names the limit. Errors do not repeat
// the path: the caller names it.
func ReadFile(path string, maxSize int64) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, unwrapPath(err)
	}
	if !fi.Mode().IsRegular() {
		return nil, notRegular(fi.Mode())
	}
	fh, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, unwrapPath(err)
	}
	defer fh.Close()
	if fi, err = fh.Stat(); err != nil {
		return nil, unwrapPath(err)
	}
	if !fi.Mode().IsRegular() {
		return nil, notRegular(fi.Mode())
	}
	if fi.Size() > maxSize {
		return nil, sizeError{fmt.Sprintf("file is %d bytes, over the size limit of %d bytes", fi.Size(), maxSize)}
	}
	data, err := io.ReadAll(io.LimitReader(fh, maxSize+1))
	if err != nil {
		return nil, unwrapPath(err)
	}
	if int64(len(data)) > maxSize {
		return nil, sizeError{fmt.Sprintf("file grew past the size limit of %d bytes while being read", maxSize)}
	}
	return data, nil
}

func notRegular(m fs.FileMode) error {
	what := "not a regular file"
	switch {
	case m&fs.ModeNamedPipe != 0:
		what = "a FIFO (named pipe)"
	case m&fs.ModeCharDevice != 0:
		what = "a character device"
	case m&fs.ModeDevice != 0:
		what = "a block device"
	case m&fs.ModeSocket != 0:
		what = "a socket"
	case m.IsDir():
		what = "a directory"
	}
	return fmt.Errorf("%w: it is %s", ErrNotRegular, what)
}

// unwrapPath drops a PathError's path (the caller names it), keeping
// fs.ErrNotExist and the like matchable.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Walk calls file for every file below dir (or dir itself when it is a
// file) whose name want accepts (nil: every name), skipping hidden
// directories and not following symlinked directories, and unreadable
// for every directory it cannot list, whose files are then missing.
func Walk(dir string, want func(name string) bool, file func(path string), unreadable func(dir string, err error)) {
	// The trailing separator follows a symlinked dir; symlinks below it
	// are not followed.
	walkRoot := dir
	if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
		walkRoot += string(filepath.Separator)
	}
	_ = filepath.WalkDir(walkRoot, func(p string, d fs.DirEntry, err error) error {
		p = filepath.Clean(p)
		if err != nil {
			if d == nil || d.IsDir() {
				unreadable(p, unwrapPath(err))
			}
			return nil
		}
		if d.IsDir() {
			if p != dir && Hidden(d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if want == nil || want(d.Name()) {
			file(p)
		}
		return nil
	})
}

// Walk is the package's Walk that also records the directories below dir
// it cannot list as Problems (Read), looked at again every Poll, and
// clears those it now can.
func (w *Watcher) Walk(dir string, want func(name string) bool, file func(path string)) {
	failed := map[string]bool{}
	Walk(dir, want, file, func(d string, err error) {
		failed[d] = true
		w.setProblem(d, false, err)
	})
	for d, p := range w.problems {
		if p.Read != nil && !failed[d] && (d == dir || strings.HasPrefix(d, dir+string(filepath.Separator))) {
			w.setProblem(d, false, nil)
		}
	}
}
