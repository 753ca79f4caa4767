// Package agent wires the host agent (baremesh-agent): it loads
// /etc/baremesh/agent.yaml, applies and keeps the capture rules,
// supervises the local proxy, checks the control plane, serves /healthz
// and /status, and talks to systemd. It imports nodeagent/iptables,
// nodeagent/reconcile and internal/version of this module, nothing else.
package agent

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/baremesh/baremesh/nodeagent/iptables"
)

// DefaultConfigPath is where the agent reads its configuration.
const DefaultConfigPath = "/etc/baremesh/agent.yaml"

// Config is the agent's configuration file.
type Config struct {
	Capture      CaptureConfig      `yaml:"capture"`
	Proxy        *ProxyConfig       `yaml:"proxy"`
	ControlPlane ControlPlaneConfig `yaml:"controlPlane"`
	// StatusAddress serves /healthz and /status. Default 127.0.0.1:15022.
	StatusAddress string `yaml:"statusAddress"`
	// Interval between reconciler passes (and drift checks). Default 10s.
	Interval time.Duration `yaml:"interval"`
	Log      LogConfig     `yaml:"log"`
	// NetNS, when set, applies capture in that named network namespace
	// instead of the agent's own (for tests and containers).
	NetNS string `yaml:"netns"`
}

// CaptureConfig is the capture settings plus how to apply them.
type CaptureConfig struct {
	iptables.Config `yaml:",inline"`
	// Disabled turns capture off (the agent then only supervises).
	Disabled bool `yaml:"disabled"`
	// Backend is nft, legacy, or empty to detect the host's.
	Backend string `yaml:"backend"`
	// KeepOnStop leaves the rules in place when the agent stops. By
	// default they are removed so that traffic is not sent to a proxy
	// that the agent no longer runs (fail open).
	KeepOnStop bool `yaml:"keepOnStop"`
}

// ProxyConfig is the local proxy the agent supervises.
type ProxyConfig struct {
	Path        string        `yaml:"path"`
	Args        []string      `yaml:"args"`
	Env         []string      `yaml:"env"`
	Bootstrap   string        `yaml:"bootstrap"`
	VersionArgs []string      `yaml:"versionArgs"`
	StopTimeout time.Duration `yaml:"stopTimeout"`
	// RunAsRoot keeps the proxy as the agent's user instead of the
	// capture's proxyUID/proxyGID (then its traffic is captured too).
	RunAsRoot bool `yaml:"runAsRoot"`
}

// ControlPlaneConfig is where the control plane is.
type ControlPlaneConfig struct {
	Address    string `yaml:"address"`
	VersionURL string `yaml:"versionURL"`
}

// LogConfig configures the structured log.
type LogConfig struct {
	Level  string `yaml:"level"`  // debug, info (default), warn, error
	Format string `yaml:"format"` // text (default) or json
}

// ErrConfig is wrapped by every configuration error.
var ErrConfig = errors.New("invalid agent config")

// Parse decodes and validates a configuration; name is used in errors.
func Parse(name string, data []byte) (Config, error) {
	var c Config
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) { // empty file: defaults
		return c, fmt.Errorf("%w: %s: not valid agent YAML: %w", ErrConfig, name, err)
	}
	c = c.WithDefaults()
	if err := c.Validate(); err != nil {
		return c, fmt.Errorf("%s: %w", name, err)
	}
	return c, nil
}

// Load reads and parses the file at path.
func Load(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return Parse(path, data)
}

// WithDefaults fills unset fields.
func (c Config) WithDefaults() Config {
	c.Capture.Config = c.Capture.Config.WithDefaults()
	if c.StatusAddress == "" {
		c.StatusAddress = "127.0.0.1:15022"
	}
	if c.Interval == 0 {
		c.Interval = 10 * time.Second
	}
	if c.Log.Level == "" {
		c.Log.Level = "info"
	}
	if c.Log.Format == "" {
		c.Log.Format = "text"
	}
	return c
}

// Validate checks a config with defaults applied; errors name the field.
func (c Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: %s: %s", ErrConfig, field, fmt.Sprintf(format, args...)))
	}
	if !c.Capture.Disabled {
		if err := c.Capture.Config.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("%w: capture: %w", ErrConfig, err))
		}
	}
	switch c.Capture.Backend {
	case "", string(iptables.BackendNFT), string(iptables.BackendLegacy):
	default:
		bad("capture.backend", "unknown backend %q (want nft, legacy or empty to detect)", c.Capture.Backend)
	}
	if c.Proxy != nil && c.Proxy.Path == "" {
		bad("proxy.path", "required when proxy is set")
	}
	if c.Interval < 10*time.Millisecond {
		bad("interval", "%s is too short (minimum 10ms)", c.Interval)
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		bad("log.level", "unknown level %q (want debug, info, warn or error)", c.Log.Level)
	}
	if c.Log.Format != "text" && c.Log.Format != "json" {
		bad("log.format", "unknown format %q (want text or json)", c.Log.Format)
	}
	return errors.Join(errs...)
}
