package dirwatch

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/baremesh/baremesh/core/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m.Run) }

// run runs a Watcher over o, recording its Changes; during the first
// one, first (if set) is called: a change made right after the read.
type run struct {
	mu      sync.Mutex
	changes []Change
}

func start(t *testing.T, o Options, first func()) *run {
	t.Helper()
	w, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	r := &run{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = w.Run(ctx, func(c Change) {
			if first != nil {
				first()
				first = nil
			}
			r.mu.Lock()
			defer r.mu.Unlock()
			r.changes = append(r.changes, c)
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	testkit.Eventually(t, "the first change", func() bool { return r.count() > 0 })
	return r
}

func (r *run) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.changes)
}

// since returns the changes after the first n.
func (r *run) since(n int) []Change {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.changes[n:])
}

// dirtySince reports whether a change after the first n has p dirty.
func (r *run) dirtySince(n int, p string) bool {
	for _, c := range r.since(n) {
		if slices.Contains(c.Dirty, p) {
			return true
		}
	}
	return false
}

func write(t *testing.T, p, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestWatchBeforeRead: a directory and file made while the first read
// runs (just after it listed) are a later Change, with no rescan to
// catch them: the watches were in place before the read (the race of
// 010ad06 in sources/credentials, and of a46bcdb for the mesh config).
func TestWatchBeforeRead(t *testing.T) {
	root := t.TempDir()
	sub := filepath.Join(root, "late")
	r := start(t, Options{Dirs: []string{root}, Depth: 1}, func() {
		write(t, filepath.Join(sub, "tls.crt"), "x")
	})
	c := r.since(0)[0]
	if !c.All || !slices.Equal(c.Dirty, []string{root}) {
		t.Fatalf("first change %+v, want All with the root dirty", c)
	}
	testkit.Eventually(t, "the directory made during the first read", func() bool { return r.dirtySince(1, sub) })
	// Its files are watched from then on (Depth 1).
	n := r.count()
	write(t, filepath.Join(sub, "tls.crt"), "y")
	testkit.Eventually(t, "a write below it", func() bool { return r.dirtySince(n, filepath.Join(sub, "tls.crt")) })
}

// TestSettle: a burst of writes is one Change after the quiet period.
func TestSettle(t *testing.T) {
	root := t.TempDir()
	r := start(t, Options{Dirs: []string{root}, Settle: time.Second, MaxSettle: 10 * time.Second}, nil)
	var want []string
	for i := range 20 {
		p := filepath.Join(root, string(rune('a'+i))+".yaml")
		write(t, p, "x")
		want = append(want, p)
	}
	testkit.Eventually(t, "a change", func() bool { return r.count() > 1 })
	if got := r.since(1); len(got) != 1 || !slices.Equal(got[0].Dirty, want) {
		t.Fatalf("changes after the burst: %+v, want one with the 20 files", got)
	}
}

// TestConfigMapSwap: a Kubernetes ConfigMap mount's update (a new
// timestamped directory, "..data" renamed onto it) marks the directory
// changed, and a read after it sees the new content through the links.
func TestConfigMapSwap(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "..v1", "mesh.yaml"), "v1")
	mustSymlink(t, "..v1", filepath.Join(root, "..data"))
	mustSymlink(t, "..data/mesh.yaml", filepath.Join(root, "mesh.yaml"))
	r := start(t, Options{Dirs: []string{root}}, nil)
	n := r.count()
	write(t, filepath.Join(root, "..v2", "mesh.yaml"), "v2")
	mustSymlink(t, "..v2", filepath.Join(root, "..data_tmp"))
	if err := os.Rename(filepath.Join(root, "..data_tmp"), filepath.Join(root, "..data")); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "the swap", func() bool { return r.dirtySince(n, root) })
	if b, err := ReadFile(filepath.Join(root, "mesh.yaml"), 1<<10); err != nil || string(b) != "v2" {
		t.Fatalf("after the swap: %q %v", b, err)
	}
}

// TestRootSymlinkSwap: a root that is a symlink swapped to another
// directory is dirty at once, and the new directory is the one watched.
func TestRootSymlinkSwap(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "conf.d")
	write(t, filepath.Join(base, "v1", "a.yaml"), "1")
	write(t, filepath.Join(base, "v2", "a.yaml"), "2")
	mustSymlink(t, "v1", root)
	r := start(t, Options{Dirs: []string{root}}, nil)
	n := r.count()
	mustSymlink(t, "v2", root+".tmp")
	if err := os.Rename(root+".tmp", root); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "the swapped root", func() bool { return r.dirtySince(n, root) })
	n = r.count()
	write(t, filepath.Join(base, "v2", "b.yaml"), "x")
	testkit.Eventually(t, "a write in the new target", func() bool { return r.dirtySince(n, filepath.Join(root, "b.yaml")) })
}

// TestRootComesAndGoes: a root that does not exist is Missing, is
// dirty once made; removed with everything in it (rm -rf), it is Gone,
// its files never reported as single removals; back, it is dirty.
func TestRootComesAndGoes(t *testing.T) {
	root := filepath.Join(t.TempDir(), "conf.d")
	// The parent's watch, not Poll; settled, as every caller is, so
	// that the rm -rf is one change.
	r := start(t, Options{Dirs: []string{root}, Poll: time.Hour, Settle: 500 * time.Millisecond}, nil)
	if c := r.since(0)[0]; !slices.Equal(c.Missing, []string{root}) || len(c.Dirty) != 0 {
		t.Fatalf("first change %+v, want the root missing", c)
	}
	write(t, filepath.Join(root, "a.yaml"), "x")
	testkit.Eventually(t, "the root made", func() bool { return r.dirtySince(1, root) })
	n := r.count()
	if err := os.RemoveAll(root); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "the root gone", func() bool {
		for _, c := range r.since(n) {
			if slices.Contains(c.Gone, root) {
				return true
			}
		}
		return false
	})
	if r.dirtySince(n, filepath.Join(root, "a.yaml")) {
		t.Fatal("a file of a removed root was reported removed on its own")
	}
	n = r.count()
	write(t, filepath.Join(root, "a.yaml"), "y")
	testkit.Eventually(t, "the root back", func() bool { return r.dirtySince(n, root) })
}

// TestRescan: with Rescan, a full read is asked periodically.
func TestRescan(t *testing.T) {
	r := start(t, Options{Dirs: []string{t.TempDir()}, Rescan: 50 * time.Millisecond}, nil)
	testkit.Eventually(t, "a rescan", func() bool {
		for _, c := range r.since(1) {
			if c.All {
				return true
			}
		}
		return false
	})
}

// TestReadFileIsHardened: a FIFO, a device, a directory and a symlink
// to a FIFO are refused at once, never read (nor blocked on); an
// oversize file is refused naming the limit; a missing one is
// fs.ErrNotExist.
func TestReadFileIsHardened(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	mustSymlink(t, "fifo", filepath.Join(dir, "link"))
	write(t, filepath.Join(dir, "big"), "0123456789")
	for p, want := range map[string]error{fifo: ErrNotRegular, filepath.Join(dir, "link"): ErrNotRegular, "/dev/null": ErrNotRegular,
		dir: ErrNotRegular, filepath.Join(dir, "big"): ErrTooLarge, filepath.Join(dir, "none"): fs.ErrNotExist} {
		if _, err := ReadFile(p, 5); !errors.Is(err, want) {
			t.Errorf("%s: %v, want %v", p, err, want)
		}
	}
	if b, err := ReadFile(filepath.Join(dir, "big"), 10); err != nil || string(b) != "0123456789" {
		t.Fatalf("big: %q %v", b, err)
	}
}

// TestUnreadableDirectory: a directory that cannot be listed is a
// Problem of Walk, its files missing; made readable, the next Poll marks
// it dirty and the next Walk clears the problem. Root reads every
// directory whatever its mode, so as root the test runs itself again as
// nobody (uid 65534) from a copy of the test binary.
func TestUnreadableDirectory(t *testing.T) {
	if testkit.AsNobody(t, "^TestUnreadableDirectory$") {
		return
	}
	root := t.TempDir()
	sub := filepath.Join(root, "sub")
	write(t, filepath.Join(sub, "b.yaml"), "x")
	if err := os.Chmod(sub, 0); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(sub, 0o755)
	w, err := New(Options{Dirs: []string{root}, Depth: Unlimited, Poll: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var files []string
	var problems []Problem
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = w.Run(ctx, func(c Change) {
			mu.Lock()
			defer mu.Unlock()
			for _, d := range c.Dirty {
				w.Walk(d, nil, func(p string) { files = append(files, p) })
			}
			problems = w.Problems()
		})
	}()
	defer func() { cancel(); <-done }()
	snapshot := func() ([]string, []Problem) {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(files), slices.Clone(problems)
	}
	testkit.Eventually(t, "sub named as unreadable", func() bool {
		_, ps := snapshot()
		return len(ps) == 1 && ps[0].Dir == sub && errors.Is(ps[0].Read, fs.ErrPermission)
	})
	if fs, _ := snapshot(); len(fs) != 0 {
		t.Fatalf("files read below an unreadable directory: %v", fs)
	}
	if err := os.Chmod(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "sub read once readable", func() bool {
		fs, ps := snapshot()
		return slices.Contains(fs, filepath.Join(sub, "b.yaml")) && len(ps) == 0
	})
}

func mustSymlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// TestSymlinkedSubdirectory: within a bounded Depth a symlinked
// directory (a credential linked in from elsewhere) is watched, so an
// edit of its target is a Change under the link's path.
func TestSymlinkedSubdirectory(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "credentials")
	write(t, filepath.Join(base, "elsewhere", "www", "tls.crt"), "1")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	mustSymlink(t, filepath.Join(base, "elsewhere", "www"), filepath.Join(root, "www"))
	r := start(t, Options{Dirs: []string{root}, Depth: 1}, nil)
	n := r.count()
	write(t, filepath.Join(base, "elsewhere", "www", "tls.crt"), "2")
	testkit.Eventually(t, "the edit through the link", func() bool { return r.dirtySince(n, filepath.Join(root, "www", "tls.crt")) })
}
