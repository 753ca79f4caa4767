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
	"strconv"
	"sync"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"

	"github.com/baremesh/baremesh/internal/version"
	"github.com/baremesh/baremesh/nodeagent/iptables"
	"github.com/baremesh/baremesh/nodeagent/reconcile"
	"github.com/baremesh/baremesh/nodeagent/tunnel"
)

// Options are the agent's collaborators beyond its config.
type Options struct {
	// DryRun prints what capture would change instead of changing it.
	DryRun io.Writer
	// Notify sends a systemd notification; default daemon.SdNotify.
	Notify func(state string)
}

// Agent is the host agent. Build it with New, then call Run once.
type Agent struct {
	log      *slog.Logger
	cfg      Config
	opts     Options
	backend  iptables.Backend
	applier  *iptables.Applier
	ruleset  *iptables.Ruleset
	proxy    *reconcile.Proxy
	tunnel   *tunnel.Tunnel
	repair   *reconcile.Background
	rec      *reconcile.Reconciler
	listener net.Listener
	ready    sync.Once
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
	a := &Agent{log: log, cfg: cfg, opts: opts}
	var comps []reconcile.Component
	if !cfg.Capture.Disabled {
		var err error
		if a.ruleset, err = iptables.Render(cfg.Capture.Config); err != nil {
			return nil, fmt.Errorf("capture: %w", err)
		}
		if opts.DryRun == nil {
			if a.backend, err = Preflight(ctx, cfg); err != nil {
				return nil, err
			}
		} else if a.backend, err = iptables.DetectBackend(ctx, iptables.Backend(cfg.Capture.Backend), cfg.NetNS); err != nil {
			return nil, err
		}
		a.applier = iptables.NewApplier(log.With("component", "capture"), iptables.ApplierOptions{
			Runner: &iptables.ExecRunner{Backend: a.backend, NetNS: cfg.NetNS},
			Router: &iptables.NetlinkRouter{NetNS: cfg.NetNS},
			DryRun: opts.DryRun,
		})
		comps = append(comps, reconcile.NewCapture(a.applier, a.ruleset))
	}
	if p := cfg.Proxy; p != nil && opts.DryRun == nil {
		spec := reconcile.ProxySpec{Path: p.Path, Args: p.Args, Env: p.Env, Bootstrap: p.Bootstrap,
			VersionArgs: p.VersionArgs, StopTimeout: p.StopTimeout, CaptureDigest: captureDigest(cfg.Capture)}
		if !cfg.Capture.Disabled && !p.RunAsRoot {
			uid, _ := strconv.ParseUint(cfg.Capture.ProxyUID, 10, 32)
			gid, _ := strconv.ParseUint(cfg.Capture.ProxyGID, 10, 32)
			u, g := uint32(uid), uint32(gid)
			spec.UID, spec.GID = &u, &g
		}
		a.proxy = reconcile.NewProxy(log.With("component", "proxy"), spec, version.Version)
		comps = append(comps, a.proxy)
	}
	// The tunnel and the repair controller have no dry-run form: a dry
	// run shows capture only.
	if cfg.Tunnel.Enabled && opts.DryRun == nil {
		var err error
		if a.tunnel, err = newTunnel(ctx, log.With("component", "tunnel"), cfg.Tunnel); err != nil {
			return nil, err
		}
		comps = append(comps, reconcile.NewTunnel(a.tunnel))
	}
	if cfg.Repair.Enabled && opts.DryRun == nil {
		var err error
		if a.repair, err = newRepair(log.With("component", "repair"), cfg.Repair); err != nil {
			return nil, err
		}
		comps = append(comps, a.repair)
	}
	comps = append(comps, &reconcile.ControlPlane{Address: cfg.ControlPlane.Address,
		VersionURL: cfg.ControlPlane.VersionURL, AgentVersion: version.Version})
	a.rec = reconcile.New(log.With("component", "reconciler"),
		reconcile.Options{Interval: cfg.Interval, OnPass: a.onPass}, comps...)
	return a, nil
}

// captureDigest is the part of the capture config the proxy depends on.
func captureDigest(c CaptureConfig) string {
	if c.Disabled {
		return "disabled"
	}
	return fmt.Sprintf("mode=%s out=%d in=%d dns=%t/%d uid=%s gid=%s", c.Mode, c.OutboundPort, c.InboundPort,
		c.CaptureDNS, c.DNSPort, c.ProxyUID, c.ProxyGID)
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
	ln, err := net.Listen("tcp", a.cfg.StatusAddress)
	if err != nil {
		return fmt.Errorf("status address %s: %w", a.cfg.StatusAddress, err)
	}
	a.listener = ln
	return nil
}

// Run applies the rules, keeps them, supervises the proxy and serves
// status until ctx is done; then it stops the proxy and (unless
// capture.keepOnStop) removes the rules.
func (a *Agent) Run(ctx context.Context) error {
	if a.opts.DryRun != nil {
		if a.applier != nil {
			return a.applier.Apply(ctx, a.ruleset)
		}
		return nil
	}
	if err := a.Listen(); err != nil {
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
	err := a.rec.Run(ctx)
	a.opts.Notify(daemon.SdNotifyStopping)
	a.log.Info("stopping")
	stopWatchdog()
	errs := []error{err, a.shutdown()}
	shutCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	errs = append(errs, srv.Shutdown(shutCtx))
	cancel()
	wg.Wait()
	return errors.Join(errs...)
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
	s := a.rec.Status()
	return s.Passes > 0 && time.Since(s.LastPass) < 3*a.cfg.Interval+time.Second
}

func (a *Agent) shutdown() error {
	var errs []error
	if a.proxy != nil {
		errs = append(errs, a.proxy.Close())
	}
	if a.repair != nil {
		errs = append(errs, a.repair.Close())
	}
	if a.tunnel != nil && !a.cfg.Tunnel.KeepOnStop {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		errs = append(errs, a.tunnel.Remove(ctx))
		cancel()
		a.log.Info("tunnel removed")
	}
	if a.applier != nil && !a.cfg.Capture.KeepOnStop {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		errs = append(errs, a.applier.Uninstall(ctx, a.cfg.Capture.ChainPrefix, a.ruleset.Route))
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
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(struct {
			Version string `json:"version"`
			Backend string `json:"backend,omitempty"`
			reconcile.NodeStatus
		}{version.Version, string(a.backend), a.rec.Status()})
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
