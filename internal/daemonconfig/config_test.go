package daemonconfig

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/baremesh/baremesh/sources/mcp"
)

// TestReadFileRelativePaths: paths in the file are relative to the file.
func TestReadFileRelativePaths(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "baremesh.yaml")
	if err := os.WriteFile(p, []byte("configDirs: [conf.d]\nstateDir: state\ndebounce: 50ms\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ConfigDirs[0] != filepath.Join(dir, "conf.d") || cfg.StateDir != filepath.Join(dir, "state") || cfg.CADir() != filepath.Join(dir, "state", "ca") {
		t.Errorf("paths not relative to the file: %+v", cfg)
	}
	if cfg.Debounce.Milliseconds() != 50 || cfg.DebounceMax != Defaults().DebounceMax {
		t.Errorf("debounce %v, max %v", cfg.Debounce, cfg.DebounceMax)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("configDirs: [a]\ndebounce: soon\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(p); err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "invalid duration") {
		t.Errorf("bad duration: %v, want the file and the reason", err)
	}
}

// TestValidateNamesTheField: each problem names its setting.
func TestValidateNamesTheField(t *testing.T) {
	for want, edit := range map[string]func(*Config){
		"configDirs":      func(c *Config) { c.ConfigDirs = nil },
		"xdsAddr":         func(c *Config) { c.XDSAddr = "0.0.0.0:15010" },
		"httpAddr":        func(c *Config) { c.HTTPAddr = "15014" },
		"logLevel":        func(c *Config) { c.LogLevel = "loud" },
		"gcPercent":       func(c *Config) { c.GCPercent = 0 },
		"debounce":        func(c *Config) { c.DebounceMax.Duration = 0 },
		"cluster: bind":   func(c *Config) { c.Cluster.Seeds = []string{"10.0.0.1:7946"} },
		"workloadCertTTL": func(c *Config) { c.WorkloadCertTTL.Duration = 0 },
		"stateDir":        func(c *Config) { c.TLSAddr, c.StateDir = "127.0.0.1:15012", "" },
		"maxFileSize":     func(c *Config) { c.MaxFileSize = 0 },
		"convergenceSLO":  func(c *Config) { c.ConvergenceSLO.Duration = -1 },
		"maxDocuments":    func(c *Config) { c.MaxDocuments = -1 },
		"memoryLimitMB":   func(c *Config) { c.MemoryLimitMB = -1 },
		"jwksRefresh":     func(c *Config) { c.JWKSTimeout.Duration = -1 },
		"allowRemoteHTTP": func(c *Config) { c.HTTPAddr = "10.0.0.1:15014" },
		"mcp[0]":          func(c *Config) { c.MCP = make([]mcp.UpstreamConfig, 1) },
	} {
		c := Defaults()
		c.ConfigDirs = []string{"/etc/baremesh/conf.d"}
		edit(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", want, err)
		}
	}
}
