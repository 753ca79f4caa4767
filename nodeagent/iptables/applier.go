package iptables

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
)

// Sentinel errors. ErrIptablesMissing and ErrNotRoot are permanent until
// the host changes; ErrApply is worth a retry on the next pass.
var (
	ErrIptablesMissing = errors.New("iptables not installed")
	ErrNotRoot         = errors.New("not running as root")
	ErrApply           = errors.New("applying capture rules failed")
	ErrNotApplied      = errors.New("no capture rules applied yet")
)

// Backend is the iptables flavour a host uses.
type Backend string

// Backends.
const (
	BackendNFT    Backend = "nft"
	BackendLegacy Backend = "legacy"
)

// Runner reads and writes one backend's rules. Implementations must be
// safe for use by one goroutine at a time (the Applier serialises calls).
type Runner interface {
	// Save returns the iptables-save (or ip6tables-save) output.
	Save(ctx context.Context, f Family) (string, error)
	// Restore feeds payload to iptables-restore --noflush.
	Restore(ctx context.Context, f Family, payload string) error
}

// Router installs TPROXY's policy routing (a fwmark rule and a local
// default route in its own table).
type Router interface {
	EnsureRoute(ctx context.Context, f Family, r Route) error
	HasRoute(ctx context.Context, f Family, r Route) (bool, error)
	RemoveRoute(ctx context.Context, f Family, r Route) error
}

// Drift describes how installed rules differ from what was last applied.
type Drift struct {
	Families []Family // families whose rules changed
	Route    bool     // policy routing missing
}

// Any reports whether anything drifted.
func (d Drift) Any() bool { return len(d.Families) > 0 || d.Route }

func (d Drift) String() string {
	var parts []string
	for _, f := range d.Families {
		parts = append(parts, f.String()+" rules changed")
	}
	if d.Route {
		parts = append(parts, "TPROXY policy routing missing")
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// Applier installs a Ruleset with a Runner, remembers what it installed,
// detects drift and uninstalls. Its methods are safe for concurrent use.
type Applier struct {
	log    *slog.Logger
	run    Runner
	router Router
	dryRun io.Writer

	mu      sync.Mutex
	applied *Ruleset
	prints  map[Family]string
}

// ApplierOptions configure NewApplier. DryRun, when set, makes the applier
// read the current rules but print what it would change instead of
// changing it.
type ApplierOptions struct {
	Runner Runner
	Router Router // may be nil when TPROXY is not used
	DryRun io.Writer
}

// NewApplier returns an Applier; log is its component logger.
func NewApplier(log *slog.Logger, opts ApplierOptions) *Applier {
	return &Applier{log: log, run: opts.Runner, router: opts.Router, dryRun: opts.DryRun}
}

// Applied returns the ruleset last applied, or nil.
func (a *Applier) Applied() *Ruleset {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.applied
}

// Apply installs rs atomically: either every family ends up with the new
// rules or, when a restore fails, the rules in force before are restored
// and an error wrapping ErrApply is returned.
func (a *Applier) Apply(ctx context.Context, rs *Ruleset) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.apply(ctx, rs)
}

func (a *Applier) apply(ctx context.Context, rs *Ruleset) error {
	fams := rs.Families()
	prev := map[Family]map[string]*installed{}
	payloads := map[Family]string{}
	for _, f := range fams {
		out, err := a.run.Save(ctx, f)
		if err != nil && a.dryRun != nil {
			// Dry run without the right to read rules (not root): show
			// the payload for a host that has none of ours.
			fmt.Fprintf(a.dryRun, "# %s: cannot read current rules (%v); assuming none installed\n", f, err)
			out, err = "", nil
		}
		if err != nil {
			return fmt.Errorf("%w: reading %s rules: %w", ErrApply, f, err)
		}
		prev[f] = parseSave(out, rs.Prefix)
		payloads[f] = transition(rs.Tables(f), prev[f])
	}
	// A family we no longer render (IPv6 turned off) loses its rules.
	if len(fams) == 1 {
		if out, err := a.run.Save(ctx, V6); err == nil {
			if cur := parseSave(out, rs.Prefix); len(cur) > 0 {
				fams = append(fams, V6)
				prev[V6] = cur
				payloads[V6] = transition(nil, cur)
			}
		}
	}
	if a.dryRun != nil {
		for _, f := range fams {
			fmt.Fprintf(a.dryRun, "# %s: %s-restore --noflush <<EOF\n%sEOF\n", f, binaryStem(f), payloads[f])
		}
		if rs.Route != nil {
			for _, f := range rs.Families() {
				fmt.Fprintf(a.dryRun, "# %s: ip rule add fwmark %#x lookup %d; ip route add local default dev lo table %d\n",
					f, rs.Route.Mark, rs.Route.Table, rs.Route.Table)
			}
		}
		return nil
	}
	if rs.Route != nil {
		if a.router == nil {
			return fmt.Errorf("%w: TPROXY needs policy routing but no router is configured", ErrApply)
		}
		for _, f := range rs.Families() {
			if err := a.router.EnsureRoute(ctx, f, *rs.Route); err != nil {
				return fmt.Errorf("%w: %s policy routing: %w", ErrApply, f, err)
			}
		}
	}
	for i, f := range fams {
		if err := a.run.Restore(ctx, f, payloads[f]); err != nil {
			err = fmt.Errorf("%w: %s: %w", ErrApply, f, err)
			if rbErr := a.rollback(ctx, rs.Prefix, fams[:i+1], prev); rbErr != nil {
				err = errors.Join(err, fmt.Errorf("rollback: %w", rbErr))
			}
			if rs.Route != nil && (a.applied == nil || a.applied.Route == nil) {
				for _, f := range rs.Families() {
					_ = a.router.RemoveRoute(ctx, f, *rs.Route)
				}
			}
			return err
		}
	}
	prints := map[Family]string{}
	for _, f := range rs.Families() {
		out, err := a.run.Save(ctx, f)
		if err != nil {
			return fmt.Errorf("%w: reading back %s rules: %w", ErrApply, f, err)
		}
		prints[f] = fingerprint(parseSave(out, rs.Prefix))
	}
	if old := a.applied; old != nil && old.Route != nil && (rs.Route == nil || *rs.Route != *old.Route) {
		for _, f := range old.Families() {
			if err := a.router.RemoveRoute(ctx, f, *old.Route); err != nil {
				a.log.Warn("removing old policy routing", "family", f, "err", err)
			}
		}
	}
	a.applied, a.prints = rs, prints
	return nil
}

// rollback restores, for each family, our chains as they were in prev.
func (a *Applier) rollback(ctx context.Context, prefix string, fams []Family, prev map[Family]map[string]*installed) error {
	var errs []error
	for _, f := range fams {
		out, err := a.run.Save(ctx, f)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", f, err))
			continue
		}
		payload := transition(asTables(prev[f]), parseSave(out, prefix))
		if err := a.run.Restore(ctx, f, payload); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", f, err))
		}
	}
	return errors.Join(errs...)
}

// Check compares the installed rules with what was last applied.
func (a *Applier) Check(ctx context.Context) (Drift, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.check(ctx)
}

func (a *Applier) check(ctx context.Context) (Drift, error) {
	var d Drift
	rs := a.applied
	if rs == nil {
		return d, ErrNotApplied
	}
	if a.dryRun != nil {
		return d, nil
	}
	for _, f := range rs.Families() {
		out, err := a.run.Save(ctx, f)
		if err != nil {
			return d, fmt.Errorf("reading %s rules: %w", f, err)
		}
		if fingerprint(parseSave(out, rs.Prefix)) != a.prints[f] {
			d.Families = append(d.Families, f)
		}
	}
	if rs.Route != nil {
		for _, f := range rs.Families() {
			ok, err := a.router.HasRoute(ctx, f, *rs.Route)
			if err != nil {
				return d, fmt.Errorf("reading %s policy routing: %w", f, err)
			}
			d.Route = d.Route || !ok
		}
	}
	return d, nil
}

// Repair re-applies the last ruleset if the installed rules drifted, and
// returns the drift it found.
func (a *Applier) Repair(ctx context.Context) (Drift, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	d, err := a.check(ctx)
	if err != nil || !d.Any() {
		return d, err
	}
	a.log.Warn("capture rules drifted, re-applying", "drift", d.String())
	return d, a.apply(ctx, a.applied)
}

// Uninstall removes every chain named prefix_* and every rule jumping to
// one, in both families, and the policy routing route (when not nil). It
// works from what is installed, so it needs no record of a past apply.
func (a *Applier) Uninstall(ctx context.Context, prefix string, route *Route) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	var errs []error
	for _, f := range []Family{V4, V6} {
		out, err := a.run.Save(ctx, f)
		if err != nil {
			errs = append(errs, fmt.Errorf("reading %s rules: %w", f, err))
			continue
		}
		cur := parseSave(out, prefix)
		if len(cur) == 0 {
			continue
		}
		payload := transition(nil, cur)
		if a.dryRun != nil {
			fmt.Fprintf(a.dryRun, "# %s: %s-restore --noflush <<EOF\n%sEOF\n", f, binaryStem(f), payload)
			continue
		}
		if err := a.run.Restore(ctx, f, payload); err != nil {
			errs = append(errs, fmt.Errorf("removing %s rules: %w", f, err))
		}
	}
	if route != nil && a.router != nil {
		for _, f := range []Family{V4, V6} {
			if a.dryRun != nil {
				fmt.Fprintf(a.dryRun, "# %s: ip rule del fwmark %#x lookup %d; ip route flush table %d\n", f, route.Mark, route.Table, route.Table)
				continue
			}
			if err := a.router.RemoveRoute(ctx, f, *route); err != nil {
				errs = append(errs, fmt.Errorf("removing %s policy routing: %w", f, err))
			}
		}
	}
	if a.dryRun == nil {
		a.applied, a.prints = nil, nil
	}
	return errors.Join(errs...)
}

func binaryStem(f Family) string {
	if f == V6 {
		return "ip6tables"
	}
	return "iptables"
}

// CheckRoot returns an error wrapping ErrNotRoot unless the process runs
// with effective UID 0.
func CheckRoot() error { return checkEUID(os.Geteuid()) }

func checkEUID(euid int) error {
	if euid != 0 {
		return fmt.Errorf("%w: capture rules need root (CAP_NET_ADMIN); running as uid %d", ErrNotRoot, euid)
	}
	return nil
}
