package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"

	"github.com/baremesh/baremesh/internal/version"
	"github.com/baremesh/baremesh/nodeagent/iptables"
	"github.com/baremesh/baremesh/nodeagent/reconcile"
)

// Options are the agent's collaborators beyond its config.
type Options struct {
	// DryRun prints what capture would change instead of changing it.
	DryRun io.Writer
	// Notify sends a systemd notification; default daemon.SdNotify.
	Notify func(state string)
	// ConfigPath is the file Reload reads again; empty: Reload refuses.
	ConfigPath string
	// Level is the level the logger uses; a reload sets it from
	// log.level. Nil: a changed log.level waits for a restart.
	Level *slog.LevelVar
	// Reloads reloads the config, as Reload does, on each value received
	// while Run runs (baremesh-agent gives its SIGHUP channel: systemctl
	// reload). Nil: only Reload reloads.
	Reloads <-chan os.Signal

	// wrapRunner, when set (by tests), wraps capture's iptables runner.
	wrapRunner func(iptables.Runner) iptables.Runner
}

// Agent is the host agent. Build it with New, then call Run once;
// Reload may be called from any goroutine while Run runs.
type Agent struct {
	log      *slog.Logger
	opts     Options
	listener net.Listener
	ready    sync.Once
	reloads  chan reloadRequest
	loopDone chan struct{} // closed when Run's reconcile loop ends

	// Owned by Run's goroutine (by New before Run starts).
	parts   parts
	conf    *configStatus
	slots   []*slot
	loopRec *reconcile.Reconciler

	mu       sync.Mutex // guards what the status server and watchdog read
	cfg      Config     // in force: restart-only settings keep their running values
	rec      *reconcile.Reconciler
	passBase int // passes of reconcilers replaced by reloads
	backend  iptables.Backend
}

// Preflight returns the errors that make capture impossible on this host:
// not root (ErrNotRoot) or no iptables (ErrIptablesMissing).
func Preflight(ctx context.Context, cfg Config) (iptables.Backend, error) {
	if err := iptables.CheckRoot(); err != nil {
		return "", err
	}
	return iptables.DetectBackend(ctx, iptables.Backend(cfg.Capture.Backend), cfg.NetNS)
}

// New checks the host, renders the rules and builds the components. It
// changes nothing on the host.
func New(ctx context.Context, log *slog.Logger, cfg Config, opts Options) (*Agent, error) {
	if opts.Notify == nil {
		opts.Notify = func(state string) { _, _ = daemon.SdNotify(false, state) }
	}
	a := &Agent{log: log, cfg: cfg, opts: opts, reloads: make(chan reloadRequest), loopDone: make(chan struct{}),
		conf: &configStatus{path: opts.ConfigPath, loaded: time.Now()}}
	p, err := a.stage(ctx, parts{}, Config{}, cfg)
	if err != nil {
		return nil, err
	}
	a.parts, a.backend = p, p.backend
	a.setComponents()
	a.rec = a.loopRec
	return a, nil
}

// slot holds a component in the reconciler. A reload that keeps the set
// of components replaces their contents in place, so the node status
// keeps its history (pass count, since when each state holds).
type slot struct{ reconcile.Component }

// setComponents puts the current parts in the reconciler's slots, or
// builds a new reconciler when the set of components changed. A new one
// is published (for /status) only after its first pass.
func (a *Agent) setComponents() {
	comps := append(a.parts.components(), a.conf)
	same := len(comps) == len(a.slots)
	for i := 0; same && i < len(comps); i++ {
		same = comps[i].Name() == a.slots[i].Name()
	}
	if same {
		for i, c := range comps {
			a.slots[i].Component = c
		}
		return
	}
	a.slots = make([]*slot, len(comps))
	list := make([]reconcile.Component, len(comps))
	for i, c := range comps {
		a.slots[i] = &slot{c}
		list[i] = a.slots[i]
	}
	a.loopRec = reconcile.New(a.log.With("component", "reconciler"), reconcile.Options{}, list...)
}

// config returns the configuration in force.
func (a *Agent) config() Config {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cfg
}

// status is the node status after the last pass, passes counted across
// reloads.
func (a *Agent) status() reconcile.NodeStatus {
	a.mu.Lock()
	rec, base := a.rec, a.passBase
	a.mu.Unlock()
	s := rec.Status()
	s.Passes += base
	return s
}

// pass runs the reconciler once and publishes it.
func (a *Agent) pass(ctx context.Context) reconcile.NodeStatus {
	s := a.loopRec.Pass(ctx)
	a.mu.Lock()
	if a.rec != a.loopRec {
		a.passBase += a.rec.Status().Passes
		a.rec = a.loopRec
	}
	s.Passes += a.passBase
	a.mu.Unlock()
	return s
}

// StatusAddr returns the address /status listens on, once Run started.
func (a *Agent) StatusAddr() string {
	if a.listener == nil {
		return ""
	}
	return a.listener.Addr().String()
}

// Listen opens the status port; Run calls it if the caller did not.
func (a *Agent) Listen() error {
	if a.listener != nil {
		return nil
	}
	addr := a.config().StatusAddress
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("status address %s: %w", addr, err)
	}
	a.listener = ln
	return nil
}

// Run applies the rules, keeps them, supervises the proxy, serves status
// and applies reloads until ctx is done; then it stops the proxy and
// (unless capture.keepOnStop) removes the rules.
func (a *Agent) Run(ctx context.Context) error {
	if a.opts.DryRun != nil {
		close(a.loopDone)
		if a.parts.applier != nil {
			return a.parts.applier.Apply(ctx, a.parts.ruleset)
		}
		return nil
	}
	if err := a.Listen(); err != nil {
		close(a.loopDone)
		return err
	}
	srv := &http.Server{Handler: a.handler(), ReadHeaderTimeout: 5 * time.Second}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := srv.Serve(a.listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.log.Error("status server", "err", err)
		}
	}()
	runCtx, stopWatchdog := context.WithCancel(ctx)
	if wd, err := daemon.SdWatchdogEnabled(false); err == nil && wd > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.watchdog(runCtx, wd/2)
		}()
	}
	a.loop(ctx)
	a.opts.Notify(daemon.SdNotifyStopping)
	a.log.Info("stopping")
	stopWatchdog()
	errs := []error{a.shutdown()}
	shutCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	errs = append(errs, srv.Shutdown(shutCtx))
	cancel()
	wg.Wait()
	return errors.Join(errs...)
}

// loop passes at once, then every interval and after each reload, until
// ctx is done. It is the only goroutine that touches the components.
func (a *Agent) loop(ctx context.Context) {
	defer close(a.loopDone)
	a.onPass(a.pass(ctx))
	t := time.NewTicker(a.config().Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			a.onPass(a.pass(ctx))
		case req := <-a.reloads:
			plan, err := a.reload(ctx)
			t.Reset(a.config().Interval)
			req.done <- reloadResult{plan, err}
		case sig := <-a.opts.Reloads:
			// reload logs what it applied or refused.
			a.log.Info("reloading the config", "signal", sig)
			_, _ = a.reload(ctx)
			t.Reset(a.config().Interval)
		}
	}
}

// onPass tells systemd the agent is ready after the first pass (the
// first apply of the rules), whatever its outcome: status says the rest.
func (a *Agent) onPass(s reconcile.NodeStatus) {
	a.ready.Do(func() {
		a.opts.Notify(daemon.SdNotifyReady)
		a.log.Info("first pass done", "state", s.State)
	})
}

func (a *Agent) watchdog(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if a.healthy() {
				a.opts.Notify(daemon.SdNotifyWatchdog)
			}
		}
	}
}

// healthy: the reconciler has passed recently.
func (a *Agent) healthy() bool {
	s := a.status()
	return s.Passes > 0 && time.Since(s.LastPass) < 3*a.config().Interval+time.Second
}

// shutdown stops what the agent runs; called after the loop ended.
func (a *Agent) shutdown() error {
	cfg, p := a.config(), a.parts
	var errs []error
	if p.proxy != nil {
		errs = append(errs, p.proxy.Close())
	}
	if p.repair != nil {
		errs = append(errs, p.repair.Close())
	}
	if p.health != nil {
		errs = append(errs, p.health.Close())
	}
	if p.tunnel != nil && !cfg.Tunnel.KeepOnStop {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		errs = append(errs, p.tunnel.Remove(ctx))
		cancel()
		a.log.Info("tunnel removed")
	}
	if p.applier != nil && !cfg.Capture.KeepOnStop {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		errs = append(errs, p.applier.Uninstall(ctx, cfg.Capture.ChainPrefix, p.ruleset.Route))
		a.log.Info("capture rules removed")
	}
	return errors.Join(errs...)
}

func (a *Agent) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		if !a.healthy() {
			http.Error(w, "reconciler has not passed recently", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) {
		a.mu.Lock()
		backend := a.backend
		a.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(struct {
			Version string `json:"version"`
			Backend string `json:"backend,omitempty"`
			reconcile.NodeStatus
		}{version.Version, string(backend), a.status()})
	})
	return mux
}

// Uninstall removes every trace of capture (both backends, both
// families, the TPROXY policy routing) whatever config applied it. It
// needs root.
func Uninstall(ctx context.Context, log *slog.Logger, cfg Config, dryRun io.Writer) error {
	if dryRun == nil {
		if err := iptables.CheckRoot(); err != nil {
			return err
		}
	}
	route := &iptables.Route{Mark: cfg.Capture.TProxyMark, Table: cfg.Capture.TProxyTable}
	var errs []error
	found := false
	for _, b := range []iptables.Backend{iptables.BackendNFT, iptables.BackendLegacy} {
		if _, err := iptables.DetectBackend(ctx, b, cfg.NetNS); err != nil {
			continue
		}
		found = true
		ap := iptables.NewApplier(log, iptables.ApplierOptions{Runner: &iptables.ExecRunner{Backend: b, NetNS: cfg.NetNS},
			Router: &iptables.NetlinkRouter{NetNS: cfg.NetNS}, DryRun: dryRun})
		if err := ap.Uninstall(ctx, cfg.Capture.ChainPrefix, route); err != nil {
			errs = append(errs, fmt.Errorf("%s backend: %w", b, err))
		}
		route = nil // routing is not per backend
	}
	if !found {
		return fmt.Errorf("%w: neither iptables-nft nor iptables-legacy is installed", iptables.ErrIptablesMissing)
	}
	return errors.Join(errs...)
}
