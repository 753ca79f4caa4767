// Package agent wires the host agent (baremesh-agent): it loads
// /etc/baremesh/agent.yaml (and reloads it on SIGHUP, see reload.go),
// applies and keeps the capture rules, supervises the local proxy, checks
// the control plane, serves /healthz and /status, and talks to systemd;
// optionally it keeps the node tunnel (tunnel:) and runs the CNI repair
// controller (repair:). It also keeps the node tunnel without the agent,
// from a tunnel.yaml (baremesh-agent tunnel: tunnelfile.go,
// tunnelcmd_linux.go); cmd/baremesh-agent holds only flags and wiring.
// It imports nodeagent/{iptables,reconcile,tunnel,repair,cni} and
// internal/version of this module, nothing else.
package agent

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/baremesh/baremesh/nodeagent/health"
	"github.com/baremesh/baremesh/nodeagent/iptables"
	"github.com/baremesh/baremesh/nodeagent/tunnel"
)

// DefaultConfigPath is where the agent reads its configuration.
const DefaultConfigPath = "/etc/baremesh/agent.yaml"

// Config is the agent's configuration file.
type Config struct {
	Capture      CaptureConfig      `yaml:"capture"`
	Proxy        *ProxyConfig       `yaml:"proxy"`
	ControlPlane ControlPlaneConfig `yaml:"controlPlane"`
	Tunnel       TunnelConfig       `yaml:"tunnel"`
	Repair       RepairConfig       `yaml:"repair"`
	// Health runs the WorkloadGroup's probe and reports it to baremeshd
	// (for an Envoy without Istio's agent); nil: off.
	Health *health.Config `yaml:"health"`
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
	// ResolvConf is read (at load and on each reload) for the host's
	// resolvers, whose queries captureDNS captures (with dnsServers).
	// Default /etc/resolv.conf; "none" reads nothing.
	ResolvConf string `yaml:"resolvConf"`
}

// DefaultResolvConf is where the host's resolvers are read from.
const DefaultResolvConf = "/etc/resolv.conf"

// hostResolvers fills HostDNSServers from ResolvConf when DNS capture
// needs them.
func (c *CaptureConfig) hostResolvers() *Problem {
	c.HostDNSServers = nil
	if c.Disabled || !c.CaptureDNS || c.CaptureAllDNS || c.ResolvConf == "none" {
		return nil
	}
	data, err := os.ReadFile(c.ResolvConf)
	if err != nil {
		return &Problem{Field: "capture.resolvConf", Msg: fmt.Sprintf("reading the host's resolvers: %v", err)}
	}
	c.HostDNSServers = iptables.ParseResolvConf(data)
	return nil
}

// TunnelConfig is the node tunnel (ambient redirection) the agent keeps
// when Enabled; nodeagent/tunnel's Config inline.
type TunnelConfig struct {
	tunnel.Config `yaml:",inline"`
	Enabled       bool   `yaml:"enabled"`
	NodeNetNS     string `yaml:"nodeNetns"`  // empty: the agent's own
	ProxyNetNS    string `yaml:"proxyNetns"` // the node proxy's; required
	Backend       string `yaml:"backend"`    // nft, legacy or empty to detect
	// KeepOnStop leaves the tunnel when the agent stops; by default it is
	// removed (ambient traffic goes direct: fail open).
	KeepOnStop bool `yaml:"keepOnStop"`
}

// RepairConfig is the CNI repair controller the agent runs when Enabled.
type RepairConfig struct {
	Enabled bool   `yaml:"enabled"`
	Node    string `yaml:"node"` // this node's name; required
	Mode    string `yaml:"mode"` // label (default) or delete
	// Kubeconfig reaches the API server; empty: in-cluster service account.
	Kubeconfig        string   `yaml:"kubeconfig"`
	ExcludeNamespaces []string `yaml:"excludeNamespaces"` // as given to cni install
	Ambient           bool     `yaml:"ambient"`           // as given to cni install
	// ReadySince is when baremesh-cni was first chained on this node;
	// pods created before need repair. Zero turns that rule off.
	ReadySince  time.Time `yaml:"readySince"`
	DeleteRate  float64   `yaml:"deleteRate"`  // per second; default 1
	DeleteBurst int       `yaml:"deleteBurst"` // default 5
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

// ErrConfig is matched (errors.Is) by every configuration error.
var ErrConfig = errors.New("invalid agent config")

// Parse decodes and validates a configuration; name is used in errors.
// An error is a *ConfigError whose problems carry name, the line and
// the field.
func Parse(name string, data []byte) (Config, error) {
	var c Config
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) { // empty file: defaults
		return c, &ConfigError{Problems: decodeProblems(name, data, err)}
	}
	c = c.WithDefaults()
	rp := c.Capture.hostResolvers()
	if err := c.Validate(); err != nil || rp != nil {
		pos := indexPositions(data)
		ce, _ := err.(*ConfigError) // Validate's only kind of error
		if ce == nil {
			ce = &ConfigError{}
		}
		if rp != nil {
			ce.Problems = append([]Problem{*rp}, ce.Problems...)
		}
		probs := make([]Problem, len(ce.Problems))
		for i, p := range ce.Problems {
			p.File, p.Line = name, pos.lineOf(p.Field)
			probs[i] = p
		}
		return c, &ConfigError{Problems: probs}
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
	if c.Capture.ResolvConf == "" {
		c.Capture.ResolvConf = DefaultResolvConf
	}
	if c.Tunnel.Enabled {
		c.Tunnel.Config = c.Tunnel.Config.WithDefaults()
	}
	if c.Repair.Mode == "" {
		c.Repair.Mode = "label"
	}
	if c.Repair.DeleteRate == 0 {
		c.Repair.DeleteRate = 1
	}
	if c.Repair.DeleteBurst == 0 {
		c.Repair.DeleteBurst = 5
	}
	if c.Repair.ExcludeNamespaces == nil {
		c.Repair.ExcludeNamespaces = []string{"kube-system", "baremesh-system"}
	}
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

// Validate checks a config with defaults applied. Its error is a
// *ConfigError whose problems name the field (by YAML path) but not the
// file or line, which only Parse knows.
func (c Config) Validate() error {
	var probs []Problem
	bad := func(field, format string, args ...any) {
		probs = append(probs, Problem{Field: field, Msg: fmt.Sprintf(format, args...)})
	}
	if !c.Capture.Disabled {
		probs = append(probs, fieldProblems("capture", c.Capture.Config.Validate(), iptables.ErrInvalidConfig.Error()+": ")...)
	}
	switch c.Capture.Backend {
	case "", string(iptables.BackendNFT), string(iptables.BackendLegacy):
	default:
		bad("capture.backend", "unknown backend %q (want nft, legacy or empty to detect)", c.Capture.Backend)
	}
	if c.Health != nil {
		if err := c.Health.Validate(); err != nil {
			for _, e := range strings.Split(err.Error(), "\n") {
				bad("health", "%s", e)
			}
		}
	}
	if c.Tunnel.Enabled {
		// tunnel.Config's errors read "tunnel: FIELD: ...".
		probs = append(probs, fieldProblems("tunnel", c.Tunnel.Config.Validate(), "tunnel: ")...)
		if c.Tunnel.ProxyNetNS == "" {
			bad("tunnel.proxyNetns", "required: the node proxy's network namespace")
		}
		switch c.Tunnel.Backend {
		case "", string(iptables.BackendNFT), string(iptables.BackendLegacy):
		default:
			bad("tunnel.backend", "unknown backend %q (want nft, legacy or empty to detect)", c.Tunnel.Backend)
		}
	}
	if c.Repair.Enabled {
		if c.Repair.Node == "" {
			bad("repair.node", "required: this node's name")
		}
		if c.Repair.Mode != "label" && c.Repair.Mode != "delete" {
			bad("repair.mode", "%q (want label or delete)", c.Repair.Mode)
		}
		if c.Repair.DeleteRate < 0 || c.Repair.DeleteBurst < 0 {
			bad("repair.deleteRate/deleteBurst", "%v/%d must be positive", c.Repair.DeleteRate, c.Repair.DeleteBurst)
		}
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
	if len(probs) == 0 {
		return nil
	}
	return &ConfigError{Problems: probs}
}
