package file_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/store"
	"github.com/baremesh/baremesh/core/testkit"
	"github.com/baremesh/baremesh/sources/file"
	"github.com/baremesh/baremesh/sources/sourcetest"
)

// fuzzSource is one watcher over one directory, shared by the fuzz
// iterations of a process (starting fsnotify per input would be most of
// the cost). It is stopped when the fuzz target ends (f.Cleanup), so the
// package's leak check sees no watcher left running.
var fuzzSource struct {
	once   sync.Once
	dir    string
	agg    *store.Aggregate
	n      int
	err    error
	cancel context.CancelFunc
	done   chan struct{}
}

// FuzzFileSource writes bytes into a watched directory: as a config file,
// or, chosen by the first byte, as a FIFO ('p'), a symlink to /dev/zero
// ('z') or a directory holding the file ('d'). Whatever it
// is, the watcher must not crash or hang (a marker file written after it
// is seen within 10 s), the good file next to it stays, and the heap
// stays bounded.
func FuzzFileSource(f *testing.F) {
	f.Add([]byte("r" + good))
	f.Add([]byte("r" + good + "---\n" + strings.Replace(good, "name: a", "name: b", 1)))
	f.Add([]byte("rapiVersion: v1\nkind: List\nitems:\n- {apiVersion: networking.istio.io/v1, kind: ServiceEntry, metadata: {name: z}, spec: {hosts: [z.mesh], resolution: NONE}}\n"))
	f.Add([]byte("r" + sourcetest.ServiceEntry("x", 1)))
	f.Add([]byte("rx: &a [1,2]\ny: [*a,*a,*a]\n"))
	f.Add([]byte("p"))
	f.Add([]byte("z"))
	f.Add([]byte("d" + good))
	f.Add([]byte("r\xff\xfe"))
	f.Cleanup(func() {
		fs := &fuzzSource
		if fs.cancel != nil {
			fs.cancel()
			<-fs.done
		}
		if fs.dir != "" {
			_ = os.RemoveAll(fs.dir)
		}
	})
	f.Fuzz(func(t *testing.T, data []byte) {
		fs := &fuzzSource
		fs.once.Do(func() {
			fs.dir, fs.err = os.MkdirTemp("", "fuzzfilesource")
			if fs.err != nil {
				return
			}
			if fs.err = os.WriteFile(filepath.Join(fs.dir, "good.yaml"), []byte(strings.Replace(good, "name: a", "name: keep", 1)), 0o644); fs.err != nil {
				return
			}
			// The marker exists before any input, so no input can claim its name.
			if fs.err = os.WriteFile(filepath.Join(fs.dir, "zz-marker.yaml"), []byte(markerYAML(1)), 0o644); fs.err != nil {
				return
			}
			fs.agg = store.NewAggregate()
			w := file.New(file.Options{Dirs: []string{fs.dir}, MaxFileSize: 1 << 20, MaxNodes: 100_000}, fs.agg.AddSource("file"))
			var runCtx context.Context
			runCtx, fs.cancel = context.WithCancel(context.Background())
			fs.done = make(chan struct{})
			go func() { defer close(fs.done); _ = w.Run(runCtx) }()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			fs.err = fs.agg.WaitSynced(ctx)
		})
		if fs.err != nil {
			t.Fatal(fs.err)
		}
		if len(data) == 0 {
			return
		}
		op, body := data[0], data[1:]
		target := filepath.Join(fs.dir, "fuzz.yaml")
		var err error
		switch op {
		case 'p':
			err = syscall.Mkfifo(target, 0o644)
		case 'z':
			err = os.Symlink("/dev/zero", target)
		case 'd':
			if err = os.Mkdir(target, 0o755); err == nil {
				err = os.WriteFile(filepath.Join(target, "in.yaml"), body, 0o644)
			}
		default:
			err = os.WriteFile(target, body, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(target)

		fs.n++
		port := fs.n%60000 + 2
		if err := os.WriteFile(filepath.Join(fs.dir, "zz-marker.yaml"), []byte(markerYAML(port)), 0o644); err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, fmt.Sprintf("the watcher to see the marker after %q", truncate(data)), func() bool {
			c, ok := fs.agg.Get(config.ServiceEntry, "test", "zz-marker")
			return ok && markerPort(c) == port
		})
		if _, ok := fs.agg.Get(config.ServiceEntry, "test", "keep"); !ok {
			t.Fatalf("the good file's resource is gone after %q", truncate(data))
		}
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		if ms.HeapAlloc > 1<<30 {
			runtime.GC()
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > 512<<20 {
				t.Fatalf("heap %d MB after %q", ms.HeapAlloc>>20, truncate(data))
			}
		}
	})
}

func markerYAML(i int) string {
	return fmt.Sprintf("apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: zz-marker, namespace: test}\nspec:\n  hosts: [m.mesh]\n  ports: [{number: %d, name: http}]\n  resolution: DNS\n", i)
}

func markerPort(c config.Config) int {
	se, ok := c.Spec.(*networking.ServiceEntry)
	if !ok || len(se.GetPorts()) == 0 {
		return 0
	}
	return int(se.GetPorts()[0].GetNumber())
}

func truncate(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "…"
	}
	return string(b)
}
