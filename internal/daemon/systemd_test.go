package daemon

import (
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baremesh/baremesh/core/testkit"
	"github.com/baremesh/baremesh/internal/daemonconfig"
)

// notifySocket is a real NOTIFY_SOCKET: a unixgram listener whose path is
// put in the environment, as systemd does for Type=notify services.
type notifySocket struct {
	conn *net.UnixConn
	msgs chan string
}

func listenNotify(t *testing.T) *notifySocket {
	t.Helper()
	path := filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("NOTIFY_SOCKET", path)
	ns := &notifySocket{conn: conn, msgs: make(chan string, 1024)}
	go func() {
		defer close(ns.msgs)
		buf := make([]byte, 4096)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			ns.msgs <- string(buf[:n])
		}
	}()
	t.Cleanup(func() { conn.Close() })
	return ns
}

// next returns the next message that satisfies match, failing after a
// deadline; the messages skipped are returned too.
func (ns *notifySocket) next(t *testing.T, what string, match func(string) bool) (string, []string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	var skipped []string
	for {
		select {
		case m := <-ns.msgs:
			if match(m) {
				return m, skipped
			}
			skipped = append(skipped, m)
		case <-deadline:
			t.Fatalf("no %s within 10s; got %q", what, skipped)
		}
	}
}

func has(sub string) func(string) bool {
	return func(m string) bool { return strings.Contains(m, sub) }
}

// writeDaemonConfig writes a baremesh.yaml over a conf.d holding one
// ServiceEntry and returns the file.
func writeDaemonConfig(t *testing.T, dir, extra string) string {
	t.Helper()
	confd := filepath.Join(dir, "conf.d")
	if err := os.MkdirAll(confd, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(confd, "web.yaml"), []byte(strings.ReplaceAll(seYAML, "PORT", "80")), 0o644); err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(dir, "baremesh.yaml")
	body := "configDirs: [conf.d]\nmeshConfig: meshconfig.yaml\nxdsAddr: 127.0.0.1:0\nhttpAddr: 127.0.0.1:0\n" + extra
	if err := os.WriteFile(f, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestSystemdNotifyMessages(t *testing.T) {
	ns := listenNotify(t)
	t.Setenv("WATCHDOG_USEC", "200000") // ping every 100ms
	t.Setenv("WATCHDOG_PID", "")
	dir := t.TempDir()
	file := writeDaemonConfig(t, dir, "logLevel: info\n")
	args := []string{"--config", file}
	cfg, _, err := daemonconfig.Load(args)
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	hang := filepath.Join(dir, "hang")
	level := new(slog.LevelVar)
	reload := make(chan os.Signal, 1)
	logs := &lockedBuffer{}
	sd := NewSystemd(d, cfg, slog.New(slog.NewTextHandler(logs, nil)), SystemdOptions{
		Args: args, Level: level, Reload: reload, StatusEvery: 50 * time.Millisecond,
		Getenv: func(k string) string {
			if k == EnvWatchdogHangFile {
				return hang
			}
			return ""
		},
	})
	ctx, cancel := context.WithCancel(context.Background())
	runDone, sdDone := make(chan error, 1), make(chan struct{})
	go func() { runDone <- d.Run(ctx) }()
	go func() { defer close(sdDone); sd.Run(ctx) }()
	defer func() {
		cancel()
		<-sdDone
		<-runDone
	}()

	if m, _ := ns.next(t, "first STATUS", has("STATUS=")); !strings.Contains(m, "loading configuration from 1 directories") {
		t.Errorf("first status = %q", m)
	}
	ready, skipped := ns.next(t, "READY=1", has("READY=1"))
	if want := "READY=1\nSTATUS=serving 1 service to 0 proxies (snapshot "; !strings.HasPrefix(ready, want) {
		t.Errorf("READY message = %q, want prefix %q", ready, want)
	}
	for _, m := range skipped {
		if strings.Contains(m, "WATCHDOG=1") {
			continue // pings may come before READY
		}
		t.Errorf("unexpected message before READY: %q", m)
	}
	ns.next(t, "WATCHDOG=1", func(m string) bool { return m == "WATCHDOG=1" })

	// A valid reload: RELOADING=1, the level applied live, READY=1.
	writeDaemonConfig(t, dir, "logLevel: debug\n")
	reload <- nil
	ns.next(t, "RELOADING=1", has("RELOADING=1"))
	m, _ := ns.next(t, "READY=1 after reload", has("READY=1"))
	if strings.Contains(m, "refused") || strings.Contains(m, "restart needed") {
		t.Errorf("status after a live reload = %q", m)
	}
	if level.Level() != slog.LevelDebug {
		t.Errorf("log level after reload = %v, want debug", level.Level())
	}

	// A restart-only change is reported in STATUS=.
	writeDaemonConfig(t, dir, "logLevel: debug\ndebounce: 200ms\n")
	reload <- nil
	ns.next(t, "RELOADING=1", has("RELOADING=1"))
	if m, _ := ns.next(t, "READY=1", has("READY=1")); !strings.Contains(m, "restart needed for debounce") {
		t.Errorf("status after a restart-only change = %q", m)
	}

	// An invalid config is refused; the old one stays (level unchanged).
	writeDaemonConfig(t, dir, "logLevel: loud\n")
	reload <- nil
	ns.next(t, "RELOADING=1", has("RELOADING=1"))
	m, _ = ns.next(t, "READY=1 after a refused reload", has("READY=1"))
	if !strings.Contains(m, "last reload refused (") || !strings.Contains(m, "running the previous config") {
		t.Errorf("status after a bad reload = %q", m)
	}
	if level.Level() != slog.LevelDebug {
		t.Errorf("log level after a refused reload = %v, want debug kept", level.Level())
	}

	// The hang hook stops the pings: over 5 intervals, none arrives.
	if err := os.WriteFile(hang, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "the hang hook to be seen", func() bool { return strings.Contains(logs.String(), "watchdog pings suspended") })
	for drain := true; drain; { // pings already queued before the hook
		select {
		case <-ns.msgs:
		default:
			drain = false
		}
	}
	quiet := time.After(500 * time.Millisecond)
	for waiting := true; waiting; {
		select {
		case m := <-ns.msgs:
			if m == "WATCHDOG=1" {
				t.Fatal("WATCHDOG=1 sent while the hang hook is set")
			}
		case <-quiet:
			waiting = false
		}
	}
	if err := os.Remove(hang); err != nil {
		t.Fatal(err)
	}
	ns.next(t, "WATCHDOG=1 after the hook is cleared", func(m string) bool { return m == "WATCHDOG=1" })

	cancel()
	if m, _ := ns.next(t, "STOPPING=1", has("STOPPING=1")); !strings.Contains(m, "STATUS=stopping") {
		t.Errorf("stopping message = %q", m)
	}
}

func TestSystemdReadyHoldHook(t *testing.T) {
	ns := listenNotify(t)
	t.Setenv("WATCHDOG_USEC", "")
	dir := t.TempDir()
	file := writeDaemonConfig(t, dir, "")
	cfg, _, err := daemonconfig.Load([]string{"--config", file})
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	hold := filepath.Join(dir, "hold")
	if err := os.WriteFile(hold, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{}
	sd := NewSystemd(d, cfg, slog.New(slog.NewTextHandler(logs, nil)), SystemdOptions{
		Getenv: func(k string) string {
			if k == EnvReadyHoldFile {
				return hold
			}
			return ""
		},
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runDone, sdDone := make(chan error, 1), make(chan struct{})
	go func() { runDone <- d.Run(ctx) }()
	go func() { defer close(sdDone); sd.Run(ctx) }()
	testkit.Eventually(t, "the hold to be seen", func() bool { return strings.Contains(logs.String(), "READY=1 held back") })
	for drain := true; drain; {
		select {
		case m := <-ns.msgs:
			if strings.Contains(m, "READY=1") {
				t.Fatalf("READY=1 sent while held: %q", m)
			}
		default:
			drain = false
		}
	}
	if err := os.Remove(hold); err != nil {
		t.Fatal(err)
	}
	ns.next(t, "READY=1 once the hold is released", has("READY=1"))
	cancel()
	<-sdDone
	<-runDone
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
