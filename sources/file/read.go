package file

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"

	"github.com/baremesh/baremesh/core/config"
)

// Limits bound what one config file may cost to read and parse, so that
// the cost of a file is roughly the cost of its bytes. The daemon and
// baremeshctl validate read with the same limits. Zero values take the
// defaults.
type Limits struct {
	// MaxFileSize rejects larger files, in bytes; default 10 MiB.
	MaxFileSize int64
	// MaxDocuments rejects a file with more resources (documents, or items
	// of a List); default 10,000.
	MaxDocuments int
	// MaxNodes rejects a resource (a document, or an item of a List) of
	// more YAML nodes (every mapping, sequence, key and value, aliases
	// expanded); default 1,000,000.
	MaxNodes int
}

// The defaults of Limits.
const (
	DefaultMaxFileSize  = 10 << 20
	DefaultMaxDocuments = 10_000
	DefaultMaxNodes     = 1_000_000
)

// WithDefaults returns l with zero fields set to the defaults.
func (l Limits) WithDefaults() Limits {
	if l.MaxFileSize <= 0 {
		l.MaxFileSize = DefaultMaxFileSize
	}
	if l.MaxDocuments <= 0 {
		l.MaxDocuments = DefaultMaxDocuments
	}
	if l.MaxNodes <= 0 {
		l.MaxNodes = DefaultMaxNodes
	}
	return l
}

// ErrNotRegular marks a path that is not a regular file (after following
// symlinks): a FIFO, a device, a socket or a directory. Such a path is
// never read: a FIFO would block the reader and a device may never end.
var ErrNotRegular = errors.New("not a regular file")

// ReadFile reads a config file of at most maxSize bytes without ever
// blocking on what is not a regular file: it stats first, opens with
// O_NONBLOCK (a FIFO swapped in after the stat does not block the open)
// and checks the open file again. A missing file (or a dangling symlink)
// gives an error that wraps fs.ErrNotExist; a FIFO, device, socket or
// directory one that wraps ErrNotRegular and names what it is; an
// oversize file one that names the limit. All wrap config.ErrParse but
// the missing file.
func ReadFile(path string, maxSize int64) ([]byte, error) {
	if maxSize <= 0 {
		maxSize = DefaultMaxFileSize
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, statError(err)
	}
	if !fi.Mode().IsRegular() {
		return nil, notRegular(fi.Mode())
	}
	fh, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, statError(err)
	}
	defer fh.Close()
	if fi, err = fh.Stat(); err != nil {
		return nil, fmt.Errorf("%w: %v", config.ErrParse, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, notRegular(fi.Mode())
	}
	if fi.Size() > maxSize {
		return nil, fmt.Errorf("%w: file is %d bytes, over the size limit of %d bytes (maxFileSize)", config.ErrParse, fi.Size(), maxSize)
	}
	data, err := io.ReadAll(io.LimitReader(fh, maxSize+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", config.ErrParse, err)
	}
	if int64(len(data)) > maxSize {
		return nil, fmt.Errorf("%w: file grew past the size limit of %d bytes (maxFileSize) while being read", config.ErrParse, maxSize)
	}
	return data, nil
}

func statError(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return err
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err // the path is said once, by the caller
	}
	return fmt.Errorf("%w: %v", config.ErrParse, err)
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
	return fmt.Errorf("%w: %w: it is %s; only regular files (or symlinks to them) are config, so it is not read", config.ErrParse, ErrNotRegular, what)
}
