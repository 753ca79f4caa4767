package daemon

import (
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/baremesh/baremesh/internal/daemonconfig"
)

func TestPlanReload(t *testing.T) {
	base := daemonconfig.Defaults()
	base.ConfigDirs = []string{"/etc/baremesh/conf.d"}
	for _, tc := range []struct {
		name   string
		change func(*daemonconfig.Config)
		want   ReloadPlan
	}{
		{"nothing", func(*daemonconfig.Config) {}, ReloadPlan{}},
		{"level is live", func(c *daemonconfig.Config) { c.LogLevel = "debug" }, ReloadPlan{Live: []string{"logLevel"}}},
		{"listeners need a restart", func(c *daemonconfig.Config) { c.XDSAddr, c.HTTPAddr = ":1", ":2" },
			ReloadPlan{Restart: []string{"xdsAddr", "httpAddr"}}},
		{"sources need a restart", func(c *daemonconfig.Config) { c.ConfigDirs = append(c.ConfigDirs, "/x") },
			ReloadPlan{Restart: []string{"configDirs"}}},
		{"both", func(c *daemonconfig.Config) {
			c.LogLevel = "warn"
			c.Debounce = daemonconfig.Duration{Duration: time.Second}
		},
			ReloadPlan{Live: []string{"logLevel"}, Restart: []string{"debounce"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			next := base
			next.ConfigDirs = append([]string(nil), base.ConfigDirs...)
			tc.change(&next)
			if got := PlanReload(base, next); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("PlanReload = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestReloaderKeepsOldConfigOnError(t *testing.T) {
	dir := t.TempDir()
	file := writeDaemonConfig(t, dir, "logLevel: warn\n")
	args := []string{"--config", file}
	cfg, _, err := daemonconfig.Load(args)
	if err != nil {
		t.Fatal(err)
	}
	level := new(slog.LevelVar)
	r := newReloader(cfg, args, level, slog.New(slog.DiscardHandler))
	if level.Level() != slog.LevelWarn {
		t.Fatalf("initial level = %v", level.Level())
	}
	steps := []struct {
		extra, wantNote string
		wantErr         bool
		wantLevel       slog.Level
	}{
		{"logLevel: error\n", "", false, slog.LevelError},
		{"logLevel: error\nmaxFileSize: 1000\n", "restart needed for maxFileSize", false, slog.LevelError},
		{"logLevel: nope\n", "last reload refused (config " + file + ": logLevel: unknown level", true, slog.LevelError},
		{"logLevel: [\n", "last reload refused (config " + file + ": error converting YAML", true, slog.LevelError},
		{"logLevel: info\n", "", false, slog.LevelInfo}, // maxFileSize back to the running value
	}
	for i, s := range steps {
		writeDaemonConfig(t, dir, s.extra)
		_, err := r.reload()
		if (err != nil) != s.wantErr {
			t.Fatalf("step %d: err = %v, want error %v", i, err, s.wantErr)
		}
		if got := r.note(); !strings.HasPrefix(got, s.wantNote) || (s.wantNote == "" && got != "") {
			t.Errorf("step %d: note = %q, want prefix %q", i, got, s.wantNote)
		}
		if level.Level() != s.wantLevel {
			t.Errorf("step %d: level = %v, want %v", i, level.Level(), s.wantLevel)
		}
		if r.current().MaxFileSize != cfg.MaxFileSize {
			t.Errorf("step %d: running maxFileSize changed to %d", i, r.current().MaxFileSize)
		}
	}
}

func TestCheckConfig(t *testing.T) {
	dir := t.TempDir()
	file := writeDaemonConfig(t, dir, "")
	if _, _, err := CheckConfig([]string{"--config", file}); err != nil {
		t.Fatalf("good config: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "meshconfig.yaml"), []byte("trustDomain: [\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := CheckConfig([]string{"--config", file}); err == nil || !strings.Contains(err.Error(), "mesh config") {
		t.Errorf("bad mesh config: err = %v", err)
	}
	if _, _, err := CheckConfig([]string{"--config", filepath.Join(dir, "missing.yaml")}); err == nil {
		t.Error("missing config file: no error")
	}
}
