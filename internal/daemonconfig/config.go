// Package daemonconfig is baremeshd's configuration: the file
// (baremesh.yaml), the flags over it, defaults and validation. It holds no
// running parts, so the tools that read the daemon's config (baremeshctl,
// onboarding) do not link the daemon: it must not import internal/daemon
// (internal/arch checks).
package daemonconfig

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/baremesh/baremesh/sources/mcp"
	"github.com/baremesh/baremesh/xdsserver/gen/istioconfig"
)

// DefaultConfigFile is where baremeshd looks without --config.
const DefaultConfigFile = "/etc/baremesh/baremesh.yaml"

// Duration is a time.Duration that reads "100ms" in YAML.
type Duration struct{ time.Duration }

// UnmarshalJSON implements json.Unmarshaler (sigs.k8s.io/yaml goes through JSON).
func (d *Duration) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("invalid duration %q (want e.g. 100ms, 10s)", s)
	}
	d.Duration = v
	return nil
}

// MarshalJSON implements json.Marshaler.
func (d Duration) MarshalJSON() ([]byte, error) { return []byte(`"` + d.String() + `"`), nil }

// Config is baremeshd's configuration: the file, then flags over it.
type Config struct {
	// ConfigDirs are watched YAML directories, in precedence order.
	// Relative paths are relative to the config file.
	ConfigDirs []string `json:"configDirs"`
	// MCP are upstream MCP-over-xDS servers (istiod, Nacos, Higress), in
	// precedence order after the config directories.
	MCP []mcp.UpstreamConfig `json:"mcp,omitempty"`
	// Clusters is a watched directory of kubeconfig files, one per
	// Kubernetes cluster (the file name without extension is the cluster
	// ID); empty means no Kubernetes. Relative to the config file.
	Clusters string `json:"clusters"`
	// ClusterDomain is the domain of Kubernetes Service hostnames
	// (name.namespace.svc.DOMAIN); empty means cluster.local.
	ClusterDomain string `json:"clusterDomain"`
	// KubeTokenAudiences are the audiences a pod's service account token
	// must be for to authenticate to the CA (as istiod's TOKEN_AUDIENCES);
	// empty means istio-ca. Used only with clusters and tlsAddr.
	KubeTokenAudiences []string `json:"kubeTokenAudiences,omitempty"`
	// MeshConfig is the mesh config file (watched); missing means Istio's
	// defaults.
	MeshConfig string `json:"meshConfig"`
	// MeshNetworks is the meshNetworks file (Istio's MeshNetworks:
	// networks and their gateways; watched); missing means one network.
	MeshNetworks string `json:"meshNetworks,omitempty"`
	XDSAddr      string `json:"xdsAddr"`
	HTTPAddr     string `json:"httpAddr"`
	LogLevel     string `json:"logLevel"`
	// MaxFileSize is the largest config file read, in bytes.
	MaxFileSize int64 `json:"maxFileSize"`
	// MaxDocuments is the most resources one config file may hold and
	// MaxNodes the most YAML nodes one resource may have; 0 takes the
	// file source's defaults (10,000 and 1,000,000).
	MaxDocuments int `json:"maxDocuments"`
	MaxNodes     int `json:"maxNodes"`
	// FileCoalesce merges a burst of file changes into one update.
	FileCoalesce Duration `json:"fileCoalesce"`
	// Debounce and DebounceMax bound the push debouncer.
	Debounce    Duration `json:"debounce"`
	DebounceMax Duration `json:"debounceMax"`
	// DebounceLeading (default true) pushes a change at once when nothing
	// was pushed for a Debounce period, and debounces the changes that
	// follow it; false waits for a quiet period before every push, as
	// istiod does (push.PipelineOptions.DebounceLeading).
	DebounceLeading bool `json:"debounceLeading"`
	// ConvergenceSLO is the objective for a change's change→ACK time per
	// proxy; slower changes are counted in
	// baremesh_xds_convergence_slo_missed_total. 0 turns it off.
	ConvergenceSLO Duration `json:"convergenceSLO"`
	// XDSSendTimeout ends an xDS stream whose proxy accepts no response
	// for that long (it does not read); 0 is the default 60s, negative
	// none. MaxStreamsPerConnection and MaxStreamsPerPeer cap the xDS
	// streams one connection and one peer address may hold (0: the
	// defaults 100 and 5,000; negative: no cap). README "Slow readers".
	XDSSendTimeout          Duration `json:"xdsSendTimeout"`
	MaxStreamsPerConnection int      `json:"maxStreamsPerConnection"`
	MaxStreamsPerPeer       int      `json:"maxStreamsPerPeer"`
	// MemoryLimitMB is a soft limit for the Go runtime (as GOMEMLIMIT):
	// the heap is collected harder near it and freed memory goes back to
	// the OS sooner. 0 leaves the runtime's default (or GOMEMLIMIT).
	MemoryLimitMB int64 `json:"memoryLimitMB"`
	// GCPercent is the Go garbage collector's target (as GOGC, which
	// overrides it). The default 50 keeps the resident set near the live
	// heap after connect storms, for a little more GC CPU.
	GCPercent int `json:"gcPercent"`
	// KeepStartupPages keeps the executable's pages resident once the
	// first snapshot is built; by default the daemon asks the kernel to
	// reclaim them then (README "Startup pages").
	KeepStartupPages bool `json:"keepStartupPages"`
	// Cluster makes this daemon one replica of several sharing their
	// auto-registrations (README "Replicas"); no bind address, no cluster.
	Cluster ClusterConfig `json:"cluster"`

	// Identity (README "Identity"). TLSAddr is the TLS port of Istio's CA
	// service (later also authenticated xDS); "" leaves it and the CA off.
	TLSAddr string `json:"tlsAddr"`
	// TLSSANs are the names (or IP addresses) the TLS port's certificate
	// carries; default istiod.istio-system.svc (which Istio's agent checks)
	// and this host's name.
	TLSSANs []string `json:"tlsSANs"`
	// StateDir holds the self-signed CA (ca/) and the join tokens (tokens/).
	StateDir string `json:"stateDir"`
	// CACertsDir, when set, is Istio's plugged-in cacerts layout (ca-cert.pem,
	// ca-key.pem, root-cert.pem, cert-chain.pem), used instead of a
	// self-signed root under StateDir/ca.
	CACertsDir string `json:"caCertsDir"`
	// WorkloadCertTTL is a workload certificate's lifetime when the request
	// asks for none; MaxWorkloadCertTTL cuts longer requests.
	WorkloadCertTTL    Duration `json:"workloadCertTTL"`
	MaxWorkloadCertTTL Duration `json:"maxWorkloadCertTTL"`

	// AllowRemotePlaintextXDS lets xdsAddr be a non-loopback address
	// (plaintext xDS authenticates nobody; off by default).
	AllowRemotePlaintextXDS bool `json:"allowRemotePlaintextXDS"`
	// AllowRemoteHTTP lets httpAddr (metrics and /debug pages, which
	// show the whole config and every proxy's) be a non-loopback address.
	AllowRemoteHTTP bool `json:"allowRemoteHTTP"`
	// MCPReaders are the identities besides the mesh root namespace's
	// that may read the Istio config over MCP on the TLS port,
	// "NAMESPACE/SERVICE_ACCOUNT" or "NAMESPACE/*" (README "Threat model").
	MCPReaders []string `json:"mcpReaders,omitempty"`
	// AllowPlaintextMCPReaders lets unauthenticated streams on xdsAddr
	// read the Istio config over MCP (an istiod on the same host, or a
	// trusted network; off by default).
	AllowPlaintextMCPReaders bool `json:"allowPlaintextMCPReaders"`
	// RegistrationGrace is how long an auto-registered WorkloadEntry
	// outlives its proxy's disconnect (README "Auto-registration").
	RegistrationGrace Duration `json:"registrationGrace"`
	// AllowUnauthenticatedRegistration lets a proxy on plaintext xDS
	// auto-register (off: only an authenticated proxy whose service
	// account is its group's may).
	AllowUnauthenticatedRegistration bool `json:"allowUnauthenticatedRegistration"`
	// CredentialsDir holds the TLS credentials Gateway servers name in
	// tls.credentialName, one directory each (README "Gateway
	// credentials"); "" reads none.
	CredentialsDir string `json:"credentialsDir"`
	// JWKSRefresh is how often the key sets RequestAuthentication
	// jwksUris name are fetched again (default 20m, istiod's); a failed
	// fetch is retried sooner. JWKSTimeout bounds one fetch (default
	// 5s), JWKSMaxSize its body in bytes (default 1 MiB). jwks.go.
	JWKSRefresh Duration `json:"jwksRefresh"`
	JWKSTimeout Duration `json:"jwksTimeout"`
	JWKSMaxSize int64    `json:"jwksMaxSize"`
}

// CADir is where the CA's files are: CACertsDir, else StateDir/ca.
func (c Config) CADir() string {
	if c.CACertsDir != "" {
		return c.CACertsDir
	}
	return filepath.Join(c.StateDir, "ca")
}

// DefaultJWKSRefresh is istiod's refresh of RequestAuthentication key sets
// (README "End-user authentication").
const DefaultJWKSRefresh = 20 * time.Minute

// Defaults returns the configuration without a file or flags.
func Defaults() Config {
	return Config{
		MeshConfig:   "/etc/baremesh/meshconfig.yaml",
		MeshNetworks: "/etc/baremesh/meshnetworks.yaml",
		XDSAddr:      "127.0.0.1:15010",
		HTTPAddr:     "127.0.0.1:15014",
		LogLevel:     "info",
		MaxFileSize:  10 << 20,
		FileCoalesce: Duration{20 * time.Millisecond},
		Debounce:     Duration{100 * time.Millisecond},
		DebounceMax:  Duration{10 * time.Second},
		// A lone change (a new service) reaches the push in the file
		// coalescing's time instead of also the debounce's (issue #30).
		DebounceLeading: true,
		GCPercent:       50,

		StateDir:           "/var/lib/baremesh",
		WorkloadCertTTL:    Duration{24 * time.Hour},
		MaxWorkloadCertTTL: Duration{90 * 24 * time.Hour},
		RegistrationGrace:  Duration{10 * time.Second},
		ConvergenceSLO:     Duration{time.Second},
		CredentialsDir:     "/etc/baremesh/credentials",
		JWKSRefresh:        Duration{DefaultJWKSRefresh},
	}
}

// Validate checks the configuration and names the field of each problem.
func (c *Config) Validate() error {
	var errs []error
	if len(c.ConfigDirs) == 0 && len(c.MCP) == 0 {
		errs = append(errs, errors.New("configDirs: at least one directory (or an mcp upstream) is required"))
	}
	names := map[string]bool{}
	for i := range c.MCP {
		if err := c.MCP[i].Validate(); err != nil {
			errs = append(errs, fmt.Errorf("mcp[%d]: %w", i, err))
		}
		if names[c.MCP[i].Name] {
			errs = append(errs, fmt.Errorf("mcp[%d]: name %q used twice", i, c.MCP[i].Name))
		}
		names[c.MCP[i].Name] = true
	}
	for name, addr := range map[string]string{"xdsAddr": c.XDSAddr, "httpAddr": c.HTTPAddr} {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			errs = append(errs, fmt.Errorf("%s: %q is not HOST:PORT: %v", name, addr, err))
		}
	}
	if err := CheckPlaintextXDS(*c); err != nil {
		errs = append(errs, err)
	}
	if err := CheckDebugHTTP(*c); err != nil {
		errs = append(errs, err)
	}
	if err := (istioconfig.Readers{Identities: c.MCPReaders}).Check(); err != nil {
		errs = append(errs, fmt.Errorf("mcpReaders: %w", err))
	}
	if c.TLSAddr != "" {
		if _, _, err := net.SplitHostPort(c.TLSAddr); err != nil {
			errs = append(errs, fmt.Errorf("tlsAddr: %q is not HOST:PORT: %v", c.TLSAddr, err))
		}
		if c.StateDir == "" && c.CACertsDir == "" {
			errs = append(errs, errors.New("stateDir: required when tlsAddr is set (the CA lives there)"))
		}
	}
	if c.WorkloadCertTTL.Duration <= 0 || c.MaxWorkloadCertTTL.Duration < c.WorkloadCertTTL.Duration {
		errs = append(errs, fmt.Errorf("workloadCertTTL: want 0 < workloadCertTTL (%v) <= maxWorkloadCertTTL (%v)", c.WorkloadCertTTL, c.MaxWorkloadCertTTL))
	}
	if _, err := ParseLevel(c.LogLevel); err != nil {
		errs = append(errs, fmt.Errorf("logLevel: %w", err))
	}
	if c.MaxFileSize <= 0 {
		errs = append(errs, fmt.Errorf("maxFileSize: must be positive, got %d", c.MaxFileSize))
	}
	if c.MaxDocuments < 0 || c.MaxNodes < 0 {
		errs = append(errs, fmt.Errorf("maxDocuments, maxNodes: must not be negative, got %d, %d", c.MaxDocuments, c.MaxNodes))
	}
	if c.GCPercent <= 0 {
		errs = append(errs, fmt.Errorf("gcPercent: must be positive, got %d", c.GCPercent))
	}
	if c.MemoryLimitMB < 0 {
		errs = append(errs, fmt.Errorf("memoryLimitMB: must not be negative, got %d", c.MemoryLimitMB))
	}
	if c.JWKSRefresh.Duration < 0 || c.JWKSTimeout.Duration < 0 || c.JWKSMaxSize < 0 {
		errs = append(errs, fmt.Errorf("jwksRefresh, jwksTimeout, jwksMaxSize: must not be negative (0 takes the default)"))
	}
	if c.ConvergenceSLO.Duration < 0 {
		errs = append(errs, fmt.Errorf("convergenceSLO: must not be negative, got %v", c.ConvergenceSLO))
	}
	if c.Debounce.Duration <= 0 || c.DebounceMax.Duration < c.Debounce.Duration {
		errs = append(errs, fmt.Errorf("debounce: want 0 < debounce (%v) <= debounceMax (%v)", c.Debounce, c.DebounceMax))
	}
	errs = append(errs, c.Cluster.validate()...)
	return errors.Join(errs...)
}

// ParseLevel reads a log level name.
func ParseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("unknown level %q (want debug, info, warn or error)", s)
	}
	return l, nil
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// Usage heads baremeshd's --help: its commands, then its flags.
const Usage = `baremeshd: the baremesh control plane daemon

Usage:
  baremeshd [flags]               serve (as the baremesh.service unit does)
  baremeshd check-config [flags]  check the config as the daemon would load it; exit 2 if it cannot start
  baremeshd version               print the version (also --version)
  baremeshd help                  this text (also --help, -h)

Flags:
`

// Load reads flags (args without the program name) and the config file
// they name, and returns the validated result. With --config-dir given
// and no --config, a missing default file is not an error.
func Load(args []string) (Config, string, error) {
	fset := flag.NewFlagSet("baremeshd", flag.ContinueOnError)
	var (
		file     = fset.String("config", "", "config file (default "+DefaultConfigFile+")")
		dirs     multiFlag
		xdsAddr  = fset.String("xds-addr", "", "xDS listen address HOST:PORT (default 127.0.0.1:15010)")
		httpAddr = fset.String("http-addr", "", "debug and metrics listen address (default 127.0.0.1:15014)")
		level    = fset.String("log-level", "", "log level: debug, info, warn, error")
		mesh     = fset.String("mesh-config", "", "mesh config file")
		tlsAddr  = fset.String("tls-addr", "", "TLS listen address HOST:PORT of the CA service (default off; Istio's is :15012)")
		stateDir = fset.String("state-dir", "", "state directory (CA, join tokens; default /var/lib/baremesh)")
	)
	fset.Var(&dirs, "config-dir", "watched config directory (repeatable)")
	fset.Usage = func() {
		fmt.Fprint(fset.Output(), Usage)
		fset.PrintDefaults()
	}
	if err := fset.Parse(args); err != nil {
		return Config{}, "", err
	}
	path := *file
	explicit := path != ""
	if !explicit {
		path = DefaultConfigFile
	}
	cfg, err := ReadFile(path)
	switch {
	case err == nil:
	case errors.Is(err, fs.ErrNotExist) && !explicit && len(dirs) > 0:
		cfg, path = Defaults(), ""
	default:
		return Config{}, "", err
	}
	if len(dirs) > 0 {
		cfg.ConfigDirs = dirs
	}
	for _, o := range []struct {
		dst *string
		v   string
	}{{&cfg.XDSAddr, *xdsAddr}, {&cfg.HTTPAddr, *httpAddr}, {&cfg.LogLevel, *level}, {&cfg.MeshConfig, *mesh},
		{&cfg.TLSAddr, *tlsAddr}, {&cfg.StateDir, *stateDir}} {
		if o.v != "" {
			*o.dst = o.v
		}
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, "", fmt.Errorf("config %s: %w", displayPath(path), err)
	}
	return cfg, path, nil
}

func displayPath(p string) string {
	if p == "" {
		return "(flags)"
	}
	return p
}

// ReadFile reads a config file over the defaults. Relative paths in it are
// made relative to the file's directory.
func ReadFile(path string) (Config, error) {
	cfg := Defaults()
	data, err := os.ReadFile(path)
	if err != nil {
		return cfg, fmt.Errorf("config %s: %w", path, err)
	}
	if err := yaml.UnmarshalStrict(data, &cfg); err != nil {
		return cfg, fmt.Errorf("config %s: %w", path, err)
	}
	base := filepath.Dir(path)
	for i, d := range cfg.ConfigDirs {
		if !filepath.IsAbs(d) {
			cfg.ConfigDirs[i] = filepath.Join(base, d)
		}
	}
	for _, u := range cfg.MCP {
		if t := u.TLSSettings; t != nil {
			for _, f := range []*string{&t.CACertificates, &t.ClientCertificate, &t.PrivateKey} {
				if *f != "" && !filepath.IsAbs(*f) {
					*f = filepath.Join(base, *f)
				}
			}
		}
	}
	for _, p := range []*string{&cfg.MeshConfig, &cfg.MeshNetworks, &cfg.StateDir, &cfg.CredentialsDir, &cfg.CACertsDir, &cfg.Clusters, &cfg.Cluster.KeyFile} {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(base, *p)
		}
	}
	return cfg, nil
}
