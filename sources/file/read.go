package file

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/sources/dirwatch"
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
var ErrNotRegular = dirwatch.ErrNotRegular

// ReadFile reads a config file of at most maxSize bytes with the
// sources' hardened reader (dirwatch.ReadFile: never blocking on what is
// not a regular file). A missing file (or a dangling symlink) gives an
// error that wraps fs.ErrNotExist; a FIFO, device, socket or directory
// one that wraps ErrNotRegular and names what it is; an oversize file
// one that names the limit. All wrap config.ErrParse but the missing
// file.
func ReadFile(path string, maxSize int64) ([]byte, error) {
	if maxSize <= 0 {
		maxSize = DefaultMaxFileSize
	}
	data, err := dirwatch.ReadFile(path, maxSize)
	switch {
	case err == nil:
		return data, nil
	case errors.Is(err, fs.ErrNotExist):
		return nil, err
	case errors.Is(err, dirwatch.ErrNotRegular):
		return nil, fmt.Errorf("%w: %w; only regular files (or symlinks to them) are config, so it is not read", config.ErrParse, err)
	case errors.Is(err, dirwatch.ErrTooLarge):
		return nil, fmt.Errorf("%w: %v (maxFileSize)", config.ErrParse, err)
	}
	return nil, fmt.Errorf("%w: %v", config.ErrParse, err)
}
