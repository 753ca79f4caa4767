// Package credentials is the source of gateway TLS credentials: a
// watched directory with one subdirectory per credential
// (NAME/tls.crt, tls.key, ca.crt, and an optional namespaces file),
// read with the config source's hardened reader (regular files only,
// never blocking on a FIFO, a size limit) and checked by
// core/credentials. Every change yields a new credentials.Set; a
// credential that cannot be served is in it with its reason.
//
// It imports core, sources/file (its reader) and sources/dirwatch (its
// watch), never xdsserver.
package credentials

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/baremesh/baremesh/core/credentials"
	"github.com/baremesh/baremesh/sources/dirwatch"
	"github.com/baremesh/baremesh/sources/file"
)

// MaxFileSize bounds one credential file.
const MaxFileSize = 1 << 20

// files are the names a credential directory may hold.
var files = []string{credentials.CertFile, credentials.KeyFile, credentials.CAFile, credentials.NamespaceFile}

// Read reads dir once. A missing dir is an empty set. A subdirectory
// that cannot be read, or a file that is not a regular file, makes that
// credential unusable with the reason.
func Read(dir string) (*credentials.Set, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return credentials.NewSet(nil), nil
	}
	if err != nil {
		return nil, fmt.Errorf("credentials directory %s: %w", dir, err)
	}
	var out []*credentials.Credential
	for _, e := range ents {
		name := e.Name()
		if name == "" || name[0] == '.' {
			continue // hidden, as Kubernetes' ..data swaps
		}
		sub := filepath.Join(dir, name)
		if fi, err := os.Stat(sub); err != nil || !fi.IsDir() {
			continue // only directories are credentials
		}
		got := map[string][]byte{}
		var bad error
		for _, f := range files {
			b, err := file.ReadFile(filepath.Join(sub, f), MaxFileSize)
			switch {
			case errors.Is(err, fs.ErrNotExist):
			case err != nil:
				bad = fmt.Errorf("%s: %w", f, err)
			default:
				got[f] = b
			}
		}
		c := credentials.Parse(name, got)
		if bad != nil {
			c.Err = bad
		}
		out = append(out, c)
	}
	return credentials.NewSet(out), nil
}

// Watch reads dir, hands the set to publish, and again after every
// change (settled over 100 ms; and every rescan interval, in case an
// event was missed), until ctx ends; publish is called only when
// something changed. The directory and each credential's directory are
// watched with the sources' one primitive (sources/dirwatch: watched
// before they are read, a directory made later, ConfigMap ..data swaps).
func Watch(ctx context.Context, dir string, rescan time.Duration, log *slog.Logger, publish func(*credentials.Set)) {
	var last []byte
	load := func() {
		set, err := Read(dir)
		if err != nil {
			log.Warn("credentials: cannot read the directory; the last credentials stay", "err", err)
			return
		}
		if sum := fingerprint(set); !bytes.Equal(sum, last) {
			last = sum
			for _, c := range set.Problems() {
				log.Warn("credential cannot be served", "credential", c.Name, "dir", filepath.Join(dir, c.Name), "err", c.Err)
			}
			publish(set)
		}
	}
	w, err := dirwatch.New(dirwatch.Options{Dirs: []string{dir}, Depth: 1, Settle: 100 * time.Millisecond, Rescan: rescan})
	if err != nil {
		log.Error("credentials: cannot watch; rescanning only", "dir", dir, "err", err)
		load()
		tick := time.NewTicker(rescan)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				load()
			}
		}
	}
	_ = w.Run(ctx, func(dirwatch.Change) { load() })
}

// fingerprint identifies a set's content, so a rescan that finds
// nothing new publishes nothing.
func fingerprint(set *credentials.Set) []byte {
	h := sha256.New()
	for _, n := range set.Names() {
		c, _ := set.Get(n)
		fmt.Fprintf(h, "%q %q %v\x00", n, c.Namespaces, c.Err)
		for _, b := range [][]byte{c.Cert, c.Key, c.CA} {
			fmt.Fprintf(h, "%d:", len(b))
			h.Write(b)
		}
	}
	return h.Sum(nil)
}
