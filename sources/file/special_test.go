package file_test

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/baremesh/baremesh/sources/file"
)

// Issue #11 items 1 and 2: only regular files are config. A FIFO, a device
// or a socket with a config name is a named problem and is never opened in
// a way that can block; the watcher goes on seeing edits and stops when
// told.

// stopWithin fails the test if the watcher does not stop in time.
func stopWithin(t *testing.T, r *running, d time.Duration) {
	t.Helper()
	done := make(chan struct{})
	go func() { r.stop(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("watcher did not stop within %v", d)
	}
}

func TestFIFOAtStart(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.yaml"), good)
	pipe := filepath.Join(dir, "pipe.yaml")
	if err := syscall.Mkfifo(pipe, 0o644); err != nil {
		t.Fatal(err)
	}
	r := run(t, file.Options{Dirs: []string{dir}}) // fails unless synced within 10 s
	if r.port("a") != 80 {
		t.Fatal("good file not loaded next to the FIFO")
	}
	checkProblem(t, r, pipe, 0, `it is a FIFO \(named pipe\); only regular files`)
	write(t, filepath.Join(dir, "b.yaml"), strings.Replace(good, "name: a", "name: b", 1))
	poll(t, "edit after the FIFO", func() bool { return r.port("b") == 80 })
	stopWithin(t, r, 5*time.Second)
}

func TestFIFOWhileRunning(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.yaml"), good)
	r := run(t, file.Options{Dirs: []string{dir}})
	pipe := filepath.Join(dir, "pipe.yaml")
	if err := syscall.Mkfifo(pipe, 0o644); err != nil {
		t.Fatal(err)
	}
	checkProblem(t, r, pipe, 0, `FIFO`)
	write(t, filepath.Join(dir, "b.yaml"), strings.Replace(good, "name: a", "name: b", 1))
	poll(t, "edit after the FIFO", func() bool { return r.port("b") == 80 })
	// A config file replaced by a FIFO keeps what it held.
	b := filepath.Join(dir, "b.yaml")
	tmp := filepath.Join(dir, "b.fifo")
	if err := syscall.Mkfifo(tmp, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, b); err != nil {
		t.Fatal(err)
	}
	checkProblem(t, r, b, 0, `FIFO`)
	if r.port("b") != 80 {
		t.Fatal("last good resources of a file replaced by a FIFO were dropped")
	}
	if err := os.Remove(pipe); err != nil {
		t.Fatal(err)
	}
	poll(t, "problem gone with the FIFO", func() bool { return r.problemFor(pipe) == "" })
	stopWithin(t, r, 5*time.Second)
}

func TestDevicesAndSockets(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.yaml"), good)
	zero := filepath.Join(dir, "zero.yaml")
	if err := os.Symlink("/dev/zero", zero); err != nil {
		t.Fatal(err)
	}
	r := run(t, file.Options{Dirs: []string{dir}})
	checkProblem(t, r, zero, 0, `it is a character device; only regular files`)
	random := filepath.Join(dir, "random.yaml")
	if err := os.Symlink("/dev/urandom", random); err != nil {
		t.Fatal(err)
	}
	checkProblem(t, r, random, 0, `character device`)
	sock := filepath.Join(dir, "s.yaml")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	checkProblem(t, r, sock, 0, `it is a socket`)
	if r.port("a") != 80 {
		t.Fatal("good file lost")
	}
	stopWithin(t, r, 5*time.Second)
}

func TestReadFileNeverBlocks(t *testing.T) {
	dir := t.TempDir()
	pipe := filepath.Join(dir, "p")
	if err := syscall.Mkfifo(pipe, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{pipe, "/dev/zero", "/dev/urandom", dir} {
		done := make(chan error, 1)
		go func() { _, err := file.ReadFile(p, 0); done <- err }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "not a regular file") {
				t.Errorf("%s: err = %v, want not a regular file", p, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("ReadFile(%s) blocked", p)
		}
	}
}
