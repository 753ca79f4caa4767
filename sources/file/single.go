package file

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/baremesh/baremesh/sources/dirwatch"
)

// WatchFile calls fn with the content of path now and after every change
// (written in place, replaced by rename, a ConfigMap ..data swap, removed:
// then data is nil). It watches the file's directory, which must exist,
// with the sources' one watched-directory primitive (sources/dirwatch:
// the watch is in place before the first read), and returns when ctx
// ends. Only a regular file of at most DefaultMaxFileSize bytes is read
// (see ReadFile).
func WatchFile(ctx context.Context, path string, fn func(data []byte, err error)) error {
	dir, base := filepath.Dir(path), filepath.Base(path)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		if err == nil {
			err = fmt.Errorf("%s is not a directory", dir)
		}
		return fmt.Errorf("watch %s: %w", path, err)
	}
	w, err := dirwatch.New(dirwatch.Options{Dirs: []string{dir}, Ignore: func(name string) bool { return name != base }})
	if err != nil {
		return fmt.Errorf("watch %s: %w", path, err)
	}
	return w.Run(ctx, func(c dirwatch.Change) {
		if !c.All && len(c.Gone) == 0 && !slices.Contains(c.Dirty, path) && !slices.Contains(c.Dirty, dir) {
			return
		}
		data, err := ReadFile(path, DefaultMaxFileSize) // never blocks on a FIFO
		if errors.Is(err, fs.ErrNotExist) {
			fn(nil, nil)
			return
		}
		fn(data, err)
	})
}
