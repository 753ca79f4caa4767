package daemon

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/workloads"
	"github.com/baremesh/baremesh/internal/daemonconfig"
)

// CheckConfig loads the configuration as baremeshd would from args and
// parses the mesh config file it names: what `baremeshd check-config` and
// the package's postinst use to decide whether the daemon can start.
func CheckConfig(args []string) (daemonconfig.Config, string, error) {
	cfg, path, err := daemonconfig.Load(args)
	if err != nil {
		return cfg, path, err
	}
	if _, err := config.LoadMeshConfig(cfg.MeshConfig); err != nil {
		return cfg, path, fmt.Errorf("mesh config %s: %w", cfg.MeshConfig, err)
	}
	if cfg.MeshNetworks != "" {
		if _, err := config.LoadMeshNetworks(cfg.MeshNetworks); err != nil {
			return cfg, path, fmt.Errorf("mesh networks %s: %w", cfg.MeshNetworks, err)
		}
	}
	if err := checkCA(cfg); err != nil {
		return cfg, path, err
	}
	if cfg.StateDir != "" { // the registrations the daemon would restore
		if err := workloads.CheckStateFile(filepath.Join(cfg.StateDir, "workloads", "entries.json")); err != nil {
			return cfg, path, err
		}
	}
	return cfg, path, nil
}

// ReloadPlan says what a new configuration changes.
type ReloadPlan struct {
	// Live are the fields applied without a restart (logLevel).
	Live []string
	// Restart are the changed fields that only take effect after a
	// restart (listeners, sources, pipeline tuning).
	Restart []string
}

// liveFields are the Config fields a reload applies in place.
var liveFields = []string{"logLevel"}

// PlanReload compares two validated configurations field by field (by
// their YAML names). It is pure.
func PlanReload(old, next daemonconfig.Config) ReloadPlan {
	var p ReloadPlan
	ov, nv := reflect.ValueOf(old), reflect.ValueOf(next)
	t := ov.Type()
	for i := range t.NumField() {
		name := strings.Split(t.Field(i).Tag.Get("json"), ",")[0]
		if reflect.DeepEqual(ov.Field(i).Interface(), nv.Field(i).Interface()) {
			continue
		}
		if slices.Contains(liveFields, name) {
			p.Live = append(p.Live, name)
		} else {
			p.Restart = append(p.Restart, name)
		}
	}
	return p
}

// reloader re-reads the daemon config on request. The configuration in
// force changes only for the live fields; the rest waits for a restart.
type reloader struct {
	args  []string
	level *slog.LevelVar
	log   *slog.Logger
	load  func(args []string) (daemonconfig.Config, string, error)

	mu      sync.Mutex
	applied daemonconfig.Config // what runs now
	pending []string
	refused string
}

func newReloader(cfg daemonconfig.Config, args []string, level *slog.LevelVar, log *slog.Logger) *reloader {
	if l, err := daemonconfig.ParseLevel(cfg.LogLevel); err == nil {
		level.Set(l)
	}
	return &reloader{args: args, level: level, log: log, load: daemonconfig.Load, applied: cfg}
}

func (r *reloader) current() daemonconfig.Config {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.applied
}

// note is the part of STATUS= about reloads: a refused config or changes
// that wait for a restart.
func (r *reloader) note() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.refused != "":
		return "last reload refused (" + r.refused + "), running the previous config"
	case len(r.pending) > 0:
		return "restart needed for " + strings.Join(r.pending, ", ")
	}
	return ""
}

// reload reads the configuration again; an invalid one is refused with a
// logged reason and the current one stays. It returns the plan applied.
func (r *reloader) reload() (ReloadPlan, error) {
	next, path, err := r.load(r.args)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.refused = firstLine(err.Error())
		r.log.Error("reload refused: keeping the running configuration", "err", err)
		return ReloadPlan{}, fmt.Errorf("reload: %w", err)
	}
	r.refused = ""
	// r.applied keeps the running value of every restart-only field, so
	// a field changed and changed back is no longer pending.
	plan := PlanReload(r.applied, next)
	if slices.Contains(plan.Live, "logLevel") {
		l, _ := daemonconfig.ParseLevel(next.LogLevel) // validated by Load
		r.level.Set(l)
		r.applied.LogLevel = next.LogLevel
		r.log.Info("log level changed", "level", next.LogLevel)
	}
	r.pending = plan.Restart
	if len(plan.Restart) > 0 {
		r.log.Warn("config reloaded; these changes need a restart (systemctl restart baremesh)",
			"fields", strings.Join(plan.Restart, ","), "config", path)
	} else {
		r.log.Info("config reloaded", "config", path, "applied", strings.Join(plan.Live, ","))
	}
	return plan, nil
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " ..."
	}
	return s
}
