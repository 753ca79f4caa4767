// Package daemon wires baremeshd: the sources, the aggregate store, the
// push pipeline, the xDS server and the HTTP debug/metrics endpoints. It is
// the only place that knows all of them. Its configuration is
// internal/daemonconfig's, so that tools reading it need not link this
// package.
package daemon

import (
	"log/slog"

	"github.com/baremesh/baremesh/internal/daemonconfig"
)

// The daemon's configuration, named here as its callers (cmd/baremeshd,
// the end-to-end tests) spell it with daemon.New.
type (
	// Config is baremeshd's configuration (daemonconfig.Config).
	Config = daemonconfig.Config
	// Duration is a time.Duration that reads "100ms" in YAML.
	Duration = daemonconfig.Duration
	// ClusterConfig is the cluster: block of baremesh.yaml.
	ClusterConfig = daemonconfig.ClusterConfig
)

// DefaultConfigFile is where baremeshd looks without --config.
const DefaultConfigFile = daemonconfig.DefaultConfigFile

// Defaults returns the configuration without a file or flags.
func Defaults() Config { return daemonconfig.Defaults() }

// ReadFile reads a config file over the defaults (daemonconfig.ReadFile).
func ReadFile(path string) (Config, error) { return daemonconfig.ReadFile(path) }

// Load reads flags and the config file they name (daemonconfig.Load).
func Load(args []string) (Config, string, error) { return daemonconfig.Load(args) }

// ParseLevel reads a log level name.
func ParseLevel(s string) (slog.Level, error) { return daemonconfig.ParseLevel(s) }

// Usage heads baremeshd's --help.
const Usage = daemonconfig.Usage
