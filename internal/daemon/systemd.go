package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/baremesh/baremesh/internal/daemonconfig"
	sddaemon "github.com/coreos/go-systemd/v22/daemon"
)

// Test-only hooks, read from the environment of the service. They exist so
// that the packaging test can show systemd's behaviour on a real daemon;
// nothing sets them in the shipped unit.
const (
	// EnvWatchdogHangFile names a file; while it exists the watchdog pings
	// stop, as they would if the daemon hung.
	EnvWatchdogHangFile = "BAREMESH_TEST_WATCHDOG_HANG_FILE"
	// EnvReadyHoldFile names a file; while it exists READY=1 is held back
	// after the first snapshot, so a test can watch the unit stay
	// "activating" until READY.
	EnvReadyHoldFile = "BAREMESH_TEST_READY_HOLD_FILE"
)

// SystemdOptions configure the systemd shell around a Daemon.
type SystemdOptions struct {
	// Args are baremeshd's command-line arguments (without the program
	// name); a reload reads them and the config file they name again.
	Args []string
	// Level is the live log level; a reload sets it.
	Level *slog.LevelVar
	// Reload delivers reload requests (SIGHUP in baremeshd). Nil: none.
	Reload <-chan os.Signal
	// Notify sends one sd_notify message; default sddaemon.SdNotify, which
	// does nothing without NOTIFY_SOCKET.
	Notify func(state string) error
	// StatusEvery is how often STATUS= is refreshed. Default 5s.
	StatusEvery time.Duration
	// Getenv reads the test hooks; default os.Getenv.
	Getenv func(string) string
}

// Systemd is the effectful shell between baremeshd and systemd: READY=1
// after the first snapshot, WATCHDOG=1 at half of WatchdogSec while the
// daemon answers /healthz, RELOADING=1/READY=1 around a reload, STATUS=
// lines and STOPPING=1. Build it with NewSystemd and call Run once, next
// to Daemon.Run; it is not safe for concurrent use beyond that.
type Systemd struct {
	d    *Daemon
	log  *slog.Logger
	opts SystemdOptions
	rl   *reloader

	lastStatus string
}

// NewSystemd builds the shell for d. cfg is the configuration d runs with.
func NewSystemd(d *Daemon, cfg daemonconfig.Config, log *slog.Logger, opts SystemdOptions) *Systemd {
	if opts.Notify == nil {
		opts.Notify = func(state string) error { _, err := sddaemon.SdNotify(false, state); return err }
	}
	if opts.StatusEvery <= 0 {
		opts.StatusEvery = 5 * time.Second
	}
	if opts.Getenv == nil {
		opts.Getenv = os.Getenv
	}
	if opts.Level == nil {
		opts.Level = new(slog.LevelVar)
	}
	log = log.With("component", "systemd")
	return &Systemd{d: d, log: log, opts: opts, rl: newReloader(cfg, opts.Args, opts.Level, log)}
}

// notify sends the states as one message; failures are logged, never fatal.
func (s *Systemd) notify(states ...string) {
	if err := s.opts.Notify(strings.Join(states, "\n")); err != nil {
		s.log.Warn("sd_notify failed", "err", err)
	}
}

// Run talks to systemd until ctx ends, then sends STOPPING=1.
func (s *Systemd) Run(ctx context.Context) {
	s.status(fmt.Sprintf("loading configuration from %d directories", len(s.rl.current().ConfigDirs)))
	wdEvery := s.watchdogInterval()
	var wdC <-chan time.Time
	if wdEvery > 0 {
		t := time.NewTicker(wdEvery)
		defer t.Stop()
		wdC = t.C
		s.log.Info("watchdog enabled", "ping", wdEvery)
	}
	statusT := time.NewTicker(s.opts.StatusEvery)
	defer statusT.Stop()

	ready := s.d.Pipeline().Ready()
	var recheck <-chan time.Time // the READY hold test hook
	serving := false
	for {
		select {
		case <-ctx.Done():
			s.notify(sddaemon.SdNotifyStopping, "STATUS=stopping: draining connections")
			return
		case <-ready:
			ready = nil
			if s.held() {
				s.log.Warn("test hook: READY=1 held back", "file", s.opts.Getenv(EnvReadyHoldFile))
				recheck = time.After(50 * time.Millisecond)
				continue
			}
			serving = true
			s.ready()
		case <-recheck:
			recheck = nil
			if s.held() {
				recheck = time.After(50 * time.Millisecond)
				continue
			}
			serving = true
			s.ready()
		case <-wdC:
			s.ping(ctx, wdEvery)
		case <-statusT.C:
			if serving {
				s.status(s.summary())
			}
		case <-s.opts.Reload:
			if !serving { // not READY yet: reload quietly, READY=1 comes later
				_, _ = s.rl.reload() // logged inside
				continue
			}
			s.notify(sddaemon.SdNotifyReloading, "STATUS=reloading configuration")
			_, _ = s.rl.reload() // logged inside; a refused config keeps the old one
			s.lastStatus = s.summary()
			s.notify(sddaemon.SdNotifyReady, "STATUS="+s.lastStatus)
		}
	}
}

// ready sends READY=1 with the first STATUS= line.
func (s *Systemd) ready() {
	s.lastStatus = s.summary()
	s.notify(sddaemon.SdNotifyReady, "STATUS="+s.lastStatus)
	s.log.Info("sent READY=1", "status", s.lastStatus)
}

// watchdogInterval is half of WatchdogSec, or 0 without a watchdog.
func (s *Systemd) watchdogInterval() time.Duration {
	wd, err := sddaemon.SdWatchdogEnabled(false)
	if err != nil {
		s.log.Warn("watchdog settings unreadable; not pinging", "err", err)
		return 0
	}
	return wd / 2
}

// ping sends WATCHDOG=1 if the daemon's HTTP server answers /healthz in
// time (so a wedged serving path stops the pings), unless the test hang
// hook is set.
func (s *Systemd) ping(ctx context.Context, every time.Duration) {
	if f := s.opts.Getenv(EnvWatchdogHangFile); f != "" {
		if _, err := os.Stat(f); err == nil {
			s.log.Warn("test hook: watchdog pings suspended", "file", f)
			return
		}
	}
	if err := s.healthy(ctx, every/2); err != nil {
		s.log.Warn("not pinging the watchdog: daemon unhealthy", "err", err)
		return
	}
	s.notify(sddaemon.SdNotifyWatchdog)
}

func (s *Systemd) healthy(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.d.HTTPAddr()+"/healthz", nil)
	if err != nil {
		return fmt.Errorf("healthz request: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("healthz: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthz: status %d", resp.StatusCode)
	}
	return nil
}

// held reports whether the test hook holds READY back.
func (s *Systemd) held() bool {
	f := s.opts.Getenv(EnvReadyHoldFile)
	if f == "" {
		return false
	}
	_, err := os.Stat(f)
	return !errors.Is(err, os.ErrNotExist)
}

// status sends STATUS= when it changed.
func (s *Systemd) status(line string) {
	if line == s.lastStatus {
		return
	}
	s.lastStatus = line
	s.notify("STATUS=" + line)
}

// summary is the STATUS= line systemctl status shows once serving.
func (s *Systemd) summary() string {
	services := 0
	version := uint64(0)
	if pc := s.d.Pipeline().Current(); pc != nil {
		services, version = len(pc.Services()), pc.Version
	}
	proxies := s.d.xds.Connected()
	line := fmt.Sprintf("serving %d %s to %d %s (snapshot %d)",
		services, plural(services, "service", "services"), proxies, plural(proxies, "proxy", "proxies"), version)
	if note := s.rl.note(); note != "" {
		line += "; " + note
	}
	return line
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// LogHandlerOptions are baremeshd's slog options: the level is live, and
// under journald (JOURNAL_STREAM set) the time is left out because the
// journal stamps every line itself.
func LogHandlerOptions(level *slog.LevelVar) *slog.HandlerOptions {
	opts := &slog.HandlerOptions{Level: level}
	if os.Getenv("JOURNAL_STREAM") != "" {
		opts.ReplaceAttr = func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		}
	}
	return opts
}
