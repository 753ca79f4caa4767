package agent

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"

	"github.com/baremesh/baremesh/internal/version"
	"github.com/baremesh/baremesh/nodeagent/health"
	"github.com/baremesh/baremesh/nodeagent/iptables"
	"github.com/baremesh/baremesh/nodeagent/reconcile"
	"github.com/baremesh/baremesh/nodeagent/tunnel"
)

// parts are the agent's components for one configuration. A reload
// stages new parts next to the running ones, reusing every component
// whose settings did not change, and commits them only once all of them
// could be built (as Caddy provisions the new config before it stops the
// old one): a configuration that cannot be served leaves the running
// parts as they are.
type parts struct {
	backend   iptables.Backend
	applier   *iptables.Applier
	ruleset   *iptables.Ruleset
	capture   *reconcile.Capture
	proxySpec reconcile.ProxySpec
	proxy     *reconcile.Proxy
	tunnel    *tunnel.Tunnel
	tunnelC   *reconcile.Tunnel
	repair    *reconcile.Background
	health    *reconcile.Background
	healthCfg *health.Config
	control   *reconcile.ControlPlane
}

// components lists the parts in reconcile order: capture before the
// proxy that receives what it captures.
func (p parts) components() []reconcile.Component {
	var out []reconcile.Component
	if p.capture != nil {
		out = append(out, p.capture)
	}
	if p.proxy != nil {
		out = append(out, p.proxy)
	}
	if p.tunnelC != nil {
		out = append(out, p.tunnelC)
	}
	if p.repair != nil {
		out = append(out, p.repair)
	}
	if p.health != nil {
		out = append(out, p.health)
	}
	return append(out, p.control)
}

// stage builds the parts for cfg, reusing those of cur (built from
// curCfg; the zero parts at start) whose settings are unchanged. It
// changes nothing on the host and nothing in cur.
func (a *Agent) stage(ctx context.Context, cur parts, curCfg, cfg Config) (parts, error) {
	var next parts
	dry := a.opts.DryRun != nil
	if !cfg.Capture.Disabled {
		if err := a.stageCapture(ctx, &next, cur, curCfg, cfg); err != nil {
			return parts{}, err
		}
	}
	if p := cfg.Proxy; p != nil && !dry {
		next.proxySpec = proxySpec(cfg)
		if cur.proxy != nil && sameCommand(cur.proxySpec, next.proxySpec) {
			next.proxy = cur.proxy // a changed spec is set at commit; its restart predicates decide
		} else {
			next.proxy = reconcile.NewProxy(a.log.With("component", "proxy"), next.proxySpec, version.Version)
		}
	}
	// The tunnel and the repair controller have no dry-run form: a dry
	// run shows capture only.
	if cfg.Tunnel.Enabled && !dry {
		if cur.tunnel != nil && sameTunnel(curCfg.Tunnel, cfg.Tunnel) {
			next.tunnel, next.tunnelC = cur.tunnel, cur.tunnelC
		} else {
			t, err := newTunnel(ctx, a.log.With("component", "tunnel"), cfg.Tunnel)
			if err != nil {
				return parts{}, err
			}
			next.tunnel, next.tunnelC = t, reconcile.NewTunnel(t)
		}
	}
	if cfg.Repair.Enabled && !dry {
		if cur.repair != nil && sameRepair(curCfg.Repair, cfg.Repair) {
			next.repair = cur.repair
		} else {
			r, err := newRepair(a.log.With("component", "repair"), cfg.Repair)
			if err != nil {
				return parts{}, err
			}
			next.repair = r
		}
	}
	if cfg.Health != nil && !dry {
		if cur.health != nil && reflect.DeepEqual(cur.healthCfg, cfg.Health) {
			next.health, next.healthCfg = cur.health, cur.healthCfg
		} else {
			r := health.New(*cfg.Health, a.log.With("component", "health"))
			next.health = reconcile.NewBackground("health", r.Run, func() string { return fmt.Sprintf("%d reports sent", r.Sent()) })
			next.healthCfg = cfg.Health
		}
	}
	next.control = cur.control
	if cur.control == nil || cur.control.Address != cfg.ControlPlane.Address || cur.control.VersionURL != cfg.ControlPlane.VersionURL {
		next.control = &reconcile.ControlPlane{Address: cfg.ControlPlane.Address,
			VersionURL: cfg.ControlPlane.VersionURL, AgentVersion: version.Version}
	}
	return next, nil
}

// stageCapture keeps the running applier while capture stays on (its
// backend, namespace and chain names only change with a restart) and the
// running ruleset when the new one renders the same, so that an
// unchanged capture config costs no iptables-restore.
func (a *Agent) stageCapture(ctx context.Context, next *parts, cur parts, curCfg, cfg Config) error {
	if cur.applier != nil {
		next.backend, next.applier = cur.backend, cur.applier
		if reflect.DeepEqual(curCfg.Capture.Config, cfg.Capture.Config) {
			next.ruleset, next.capture = cur.ruleset, cur.capture
			return nil
		}
	}
	rs, err := iptables.Render(cfg.Capture.Config)
	if err != nil {
		return fmt.Errorf("capture: %w", err)
	}
	if cur.ruleset != nil && reflect.DeepEqual(rs, cur.ruleset) {
		next.ruleset, next.capture = cur.ruleset, cur.capture
		return nil
	}
	next.ruleset = rs
	if next.applier == nil {
		if a.opts.DryRun == nil {
			next.backend, err = Preflight(ctx, cfg)
		} else {
			next.backend, err = iptables.DetectBackend(ctx, iptables.Backend(cfg.Capture.Backend), cfg.NetNS)
		}
		if err != nil {
			return err
		}
		var runner iptables.Runner = &iptables.ExecRunner{Backend: next.backend, NetNS: cfg.NetNS}
		if a.opts.wrapRunner != nil {
			runner = a.opts.wrapRunner(runner)
		}
		next.applier = iptables.NewApplier(a.log.With("component", "capture"), iptables.ApplierOptions{
			Runner: runner,
			Router: &iptables.NetlinkRouter{NetNS: cfg.NetNS},
			DryRun: a.opts.DryRun,
		})
	}
	next.capture = reconcile.NewCapture(next.applier, rs)
	return nil
}

// commit stops what cur runs and next does not. What next keeps or adds
// comes up in the reconciler pass that follows. Capture goes first, so
// traffic is not captured towards a proxy or tunnel that is gone; new
// rules replace old ones in the next pass through the applier's atomic
// restore, never by removing them first.
func (a *Agent) commit(ctx context.Context, cur, next parts, curCfg Config) error {
	var errs []error
	if cur.applier != nil && next.applier == nil {
		if err := cur.applier.Uninstall(ctx, curCfg.Capture.ChainPrefix, cur.ruleset.Route); err != nil {
			errs = append(errs, fmt.Errorf("removing capture rules: %w", err))
		}
		a.log.Info("capture disabled: rules removed")
	}
	if cur.tunnel != nil && cur.tunnel != next.tunnel {
		if err := cur.tunnel.Remove(ctx); err != nil {
			errs = append(errs, fmt.Errorf("removing the old tunnel: %w", err))
		}
		a.log.Info("tunnel removed", "reason", reason(next.tunnel != nil, "its settings changed", "tunnel disabled"))
	}
	if cur.proxy != nil && cur.proxy != next.proxy {
		if err := cur.proxy.Close(); err != nil {
			errs = append(errs, fmt.Errorf("stopping the proxy: %w", err))
		}
		a.log.Info("proxy stopped", "reason", reason(next.proxy != nil, "its command changed", "proxy removed from the config"))
	} else if next.proxy != nil && !reflect.DeepEqual(cur.proxySpec, next.proxySpec) {
		next.proxy.SetSpec(next.proxySpec)
	}
	if cur.health != nil && cur.health != next.health {
		errs = append(errs, cur.health.Close())
		a.log.Info("health reporter stopped", "reason", reason(next.health != nil, "its settings changed", "health removed from the config"))
	}
	if cur.repair != nil && cur.repair != next.repair {
		errs = append(errs, cur.repair.Close())
		a.log.Info("repair controller stopped", "reason", reason(next.repair != nil, "its settings changed", "repair disabled"))
	}
	return errors.Join(errs...)
}

func reason(replaced bool, changed, removed string) string {
	if replaced {
		return changed
	}
	return removed
}

// proxySpec is how cfg says to run the proxy (cfg.Proxy set).
func proxySpec(cfg Config) reconcile.ProxySpec {
	p := cfg.Proxy
	spec := reconcile.ProxySpec{Path: p.Path, Args: p.Args, Env: p.Env, Bootstrap: p.Bootstrap,
		VersionArgs: p.VersionArgs, StopTimeout: p.StopTimeout, CaptureDigest: captureDigest(cfg.Capture)}
	if !cfg.Capture.Disabled && !p.RunAsRoot {
		// proxyUID/proxyGID may list several ids; the proxy runs as the first.
		uid, _ := strconv.ParseUint(iptables.FirstID(cfg.Capture.ProxyUID), 10, 32)
		gid, _ := strconv.ParseUint(iptables.FirstID(cfg.Capture.ProxyGID), 10, 32)
		u, g := uint32(uid), uint32(gid)
		spec.UID, spec.GID = &u, &g
	}
	return spec
}

// sameCommand: the process a and b start is the same (binary, arguments,
// environment, user). The rest of a spec (bootstrap, capture digest,
// version arguments, stop timeout) can change under a running proxy,
// whose restart predicates then decide.
func sameCommand(a, b reconcile.ProxySpec) bool {
	return a.Path == b.Path && slices.Equal(a.Args, b.Args) && slices.Equal(a.Env, b.Env) &&
		samePtr(a.UID, b.UID) && samePtr(a.GID, b.GID)
}

func samePtr(a, b *uint32) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

// sameTunnel: a and b make the same tunnel (keepOnStop aside).
func sameTunnel(a, b TunnelConfig) bool {
	a.KeepOnStop, b.KeepOnStop = false, false
	return reflect.DeepEqual(a, b)
}

// captureDigest is the part of the capture config the proxy depends on.
func captureDigest(c CaptureConfig) string {
	if c.Disabled {
		return "disabled"
	}
	return fmt.Sprintf("mode=%s out=%d in=%d dns=%t/%d uid=%s gid=%s tunnel=%d", c.Mode, c.OutboundPort, c.InboundPort,
		c.CaptureDNS, c.DNSPort, c.ProxyUID, c.ProxyGID, c.InboundTunnelPort)
}
