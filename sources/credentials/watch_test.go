package credentials

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/baremesh/baremesh/core/credentials"
	"github.com/baremesh/baremesh/core/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m.Run) }

// TestWatchIsHardened: a FIFO where a credential file belongs never
// blocks the reader (the credential is unusable, with the reason), and
// a later good credential is seen; the directory may appear after start.
func TestWatchIsHardened(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "credentials") // created later
	var last atomic.Pointer[credentials.Set]
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		Watch(ctx, dir, time.Hour, slog.New(slog.DiscardHandler), func(s *credentials.Set) { last.Store(s) })
	}()
	defer func() { cancel(); <-done }()
	testkit.EventuallyWithin(t, 10*time.Second, "the first (empty) set", func() bool { return last.Load() != nil })

	if err := os.MkdirAll(filepath.Join(dir, "fifo"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo", "tls.crt"), 0o600); err != nil {
		t.Fatal(err)
	}
	testkit.EventuallyWithin(t, 10*time.Second, "the FIFO credential reported", func() bool {
		c, ok := last.Load().Get("fifo")
		return ok && c.Err != nil
	})
	c, _ := last.Load().Get("fifo")
	t.Logf("fifo: %v", c.Err)
	if err := os.MkdirAll(filepath.Join(dir, "later"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "later", "ca.crt"), []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	testkit.EventuallyWithin(t, 10*time.Second, "a later credential seen", func() bool {
		_, ok := last.Load().Get("later")
		return ok
	})
}
