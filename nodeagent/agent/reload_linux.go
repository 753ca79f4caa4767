package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"golang.org/x/sys/unix"

	"github.com/baremesh/baremesh/nodeagent/reconcile"
)

// ErrNotRunning is returned by Reload when Run is not running.
var ErrNotRunning = errors.New("agent not running")

type reloadRequest struct{ done chan reloadResult }

type reloadResult struct {
	plan ReloadPlan
	err  error
}

// Reload reads the config file (Options.ConfigPath) again and applies
// it: what SIGHUP does. An invalid file is refused: the running config
// and everything it set up stay, the error is logged (file, line, field)
// and shown on /status by the "config" component. A valid one is applied
// through the components (see PlanReload for what waits for a restart),
// followed by one reconciler pass; Reload returns after that pass, so the
// new rules are in force when it returns nil. It is safe to call from any
// goroutine; the reload itself runs on Run's reconcile loop, between two
// passes. Before the loop's first pass it waits; after Run it returns
// ErrNotRunning.
func (a *Agent) Reload(ctx context.Context) (ReloadPlan, error) {
	req := reloadRequest{done: make(chan reloadResult, 1)}
	select {
	case a.reloads <- req:
	case <-a.loopDone:
		return ReloadPlan{}, ErrNotRunning
	case <-ctx.Done():
		return ReloadPlan{}, ctx.Err()
	}
	select {
	case r := <-req.done:
		return r.plan, r.err
	case <-ctx.Done():
		return ReloadPlan{}, ctx.Err()
	}
}

// reload runs on the loop goroutine, framed for systemd by RELOADING=1
// and READY=1 as baremeshd's reload is.
func (a *Agent) reload(ctx context.Context) (ReloadPlan, error) {
	a.opts.Notify(strings.Join([]string{daemon.SdNotifyReloading, monotonicUsec(), "STATUS=reloading " + a.opts.ConfigPath}, "\n"))
	plan, err := a.applyFile(ctx)
	a.pass(ctx)
	a.opts.Notify(daemon.SdNotifyReady + "\nSTATUS=" + a.conf.line())
	return plan, err
}

// monotonicUsec is the MONOTONIC_USEC= field systemd (253 and later)
// wants with RELOADING=1 to tell reload cycles apart.
func monotonicUsec() string {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts) != nil {
		return ""
	}
	return "MONOTONIC_USEC=" + strconv.FormatInt(ts.Nano()/1000, 10)
}

// applyFile loads, plans, stages and commits the file's configuration;
// nothing changes unless the file is valid and every component it asks
// for could be built.
func (a *Agent) applyFile(ctx context.Context) (ReloadPlan, error) {
	path := a.opts.ConfigPath
	if path == "" {
		return ReloadPlan{}, a.refuse(errors.New("no config file to reload: the agent was given its config directly"))
	}
	next, err := Load(path)
	if err != nil {
		return ReloadPlan{}, a.refuse(err)
	}
	running := a.config()
	plan := PlanReload(running, next)
	if a.opts.Level == nil && slices.Contains(plan.Apply, "log.level") {
		plan.Apply = slices.DeleteFunc(plan.Apply, func(s string) bool { return s == "log.level" })
		plan.Restart = append(plan.Restart, "log.level")
		plan.Config.Log.Level = running.Log.Level
	}
	staged, err := a.stage(ctx, a.parts, running, plan.Config)
	if err != nil {
		return ReloadPlan{}, a.refuse(fmt.Errorf("%s: %w", path, err))
	}
	cerr := a.commit(ctx, a.parts, staged, running)
	a.parts = staged
	a.mu.Lock()
	a.cfg, a.backend = plan.Config, staged.backend
	a.mu.Unlock()
	a.setComponents()
	if slices.Contains(plan.Apply, "log.level") {
		var l slog.Level
		_ = l.UnmarshalText([]byte(plan.Config.Log.Level)) // validated by Load
		a.opts.Level.Set(l)
	}
	a.conf.accept(plan)
	switch {
	case len(plan.Restart) > 0:
		a.log.Warn("config reloaded; these changes need a restart (systemctl restart baremesh-agent)",
			"fields", strings.Join(plan.Restart, ","), "applied", strings.Join(plan.Apply, ","), "config", path)
	default:
		a.log.Info("config reloaded", "config", path, "applied", strings.Join(plan.Apply, ","))
	}
	if cerr != nil {
		a.log.Error("reload: stopping what the new config no longer runs", "err", cerr)
	}
	return plan, cerr
}

// refuse records and logs a reload that changed nothing.
func (a *Agent) refuse(err error) error {
	a.conf.refuse(err)
	a.log.Error("reload refused: keeping the running configuration", "config", a.opts.ConfigPath, "err", err)
	return fmt.Errorf("reload: %w", err)
}

// configStatus is the "config" component: what the last reload did. It
// never acts; it reports a refused file or settings that wait for a
// restart as a Warning. Only the loop goroutine touches it.
type configStatus struct {
	path    string
	loaded  time.Time // of the config in force
	reloads int
	applied []string // by the last reload
	refused string   // the last reload's error; "" once one is applied
	restart []string // changed settings waiting for a restart
}

var _ reconcile.Component = (*configStatus)(nil)

// Name implements reconcile.Component.
func (c *configStatus) Name() string { return "config" }

// Reconcile implements reconcile.Component.
func (c *configStatus) Reconcile(context.Context) reconcile.Status {
	if c.refused != "" || len(c.restart) > 0 {
		return reconcile.Warning("%s", c.line())
	}
	return reconcile.Ready("%s", c.line())
}

func (c *configStatus) refuse(err error) {
	c.reloads++
	c.refused = err.Error()
}

func (c *configStatus) accept(p ReloadPlan) {
	c.reloads++
	c.refused, c.restart, c.applied, c.loaded = "", p.Restart, p.Apply, time.Now()
}

// line says what the config in force is and what the last reload did;
// it is the STATUS= line after a reload.
func (c *configStatus) line() string {
	var b strings.Builder
	if c.path == "" {
		b.WriteString("config given at start")
	} else {
		fmt.Fprintf(&b, "%s loaded at %s", c.path, c.loaded.Format(time.TimeOnly))
	}
	switch {
	case c.refused != "":
		b.WriteString("; last reload refused, running the previous config: " + c.refused)
	case c.reloads > 0 && len(c.applied) == 0:
		b.WriteString(", reload changed nothing")
	case c.reloads > 0:
		b.WriteString(", reload applied " + strings.Join(c.applied, ", "))
	}
	if len(c.restart) > 0 {
		b.WriteString("; restart needed for " + strings.Join(c.restart, ", "))
	}
	return b.String()
}
