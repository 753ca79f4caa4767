package file

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/fsnotify/fsnotify"
)

// WatchFile calls fn with the content of path now and after every change
// (written in place, replaced by rename, a ConfigMap ..data swap, removed:
// then data is nil). It watches the file's directory, which must exist,
// and returns when ctx ends. Only a regular file of at most
// DefaultMaxFileSize bytes is read (see ReadFile).
func WatchFile(ctx context.Context, path string, fn func(data []byte, err error)) error {
	fsw, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch %s: %w", path, err)
	}
	defer fsw.Close()
	dir, base := filepath.Dir(path), filepath.Base(path)
	if err := fsw.Add(dir); err != nil {
		return fmt.Errorf("watch %s: %w", path, err)
	}
	read := func() {
		data, err := ReadFile(path, DefaultMaxFileSize) // never blocks on a FIFO
		if errors.Is(err, fs.ErrNotExist) {
			fn(nil, nil)
			return
		}
		fn(data, err)
	}
	read()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-fsw.Events:
			if !ok {
				return nil
			}
			name := filepath.Base(ev.Name)
			if ev.Op != fsnotify.Chmod && (name == base || name == "..data") {
				read()
			}
		case <-fsw.Errors:
		}
	}
}
