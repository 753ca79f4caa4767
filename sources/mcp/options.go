package mcp

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// UpstreamConfig is one `mcp:` entry of baremesh.yaml. Its names follow
// Istio's mesh config ConfigSource (address, tlsSettings).
type UpstreamConfig struct {
	// Name names the upstream in Configs ("mcp:NAME"), problems, metrics
	// and /debug/configz. Required, unique.
	Name string `json:"name"`
	// Address is "xds://host:port" (Istio's configSources form) or
	// "host:port".
	Address string `json:"address"`
	// TLSSettings: nil or mode DISABLE is plaintext.
	TLSSettings *TLSSettings `json:"tlsSettings,omitempty"`
	// Kinds to subscribe to: kind names ("VirtualService") or type URLs of
	// an older version a server may serve
	// ("networking.istio.io/v1alpha3/VirtualService"). Empty: every kind
	// baremesh reads, at its v1 storage version.
	Kinds []string `json:"kinds,omitempty"`
	// Delta subscribes with incremental xDS instead of state of the world.
	Delta bool `json:"delta,omitempty"`
	// NodeID is the xDS node id; default as Istio's own MCP client:
	// sidecar~127.0.0.1~baremesh.baremesh~baremesh.svc.cluster.local.
	NodeID string `json:"nodeId,omitempty"`
	// MaxMessageSize bounds one response, in bytes; default 256 MiB.
	MaxMessageSize int `json:"maxMessageSize,omitempty"`
}

// TLSSettings are Istio's ClientTLSSettings fields baremesh reads.
type TLSSettings struct {
	// Mode is DISABLE, SIMPLE (verify the server) or MUTUAL (and present
	// a client certificate).
	Mode string `json:"mode"`
	// CACertificates is a PEM file of the CAs that sign the server's
	// certificate; empty means the system roots.
	CACertificates string `json:"caCertificates,omitempty"`
	// ClientCertificate and PrivateKey are PEM files, for MUTUAL.
	ClientCertificate string `json:"clientCertificate,omitempty"`
	PrivateKey        string `json:"privateKey,omitempty"`
	// SNI overrides the server name checked in its certificate.
	SNI string `json:"sni,omitempty"`
}

// HostPort returns the dial address of c.Address.
func (c *UpstreamConfig) HostPort() string { return strings.TrimPrefix(c.Address, "xds://") }

// Validate checks c and names the field of each problem.
func (c *UpstreamConfig) Validate() error {
	var errs []error
	if c.Name == "" {
		errs = append(errs, errors.New("name: required"))
	}
	if strings.Contains(c.Address, "://") && !strings.HasPrefix(c.Address, "xds://") {
		errs = append(errs, fmt.Errorf("address: %q: only xds://host:port or host:port is supported", c.Address))
	} else if _, _, err := net.SplitHostPort(c.HostPort()); err != nil {
		errs = append(errs, fmt.Errorf("address: %q is not xds://HOST:PORT: %v", c.Address, err))
	}
	for i, k := range c.Kinds {
		if _, err := resolveKind(k); err != nil {
			errs = append(errs, fmt.Errorf("kinds[%d]: %v", i, err))
		}
	}
	if c.MaxMessageSize < 0 {
		errs = append(errs, fmt.Errorf("maxMessageSize: must not be negative, got %d", c.MaxMessageSize))
	}
	if t := c.TLSSettings; t != nil {
		switch t.Mode {
		case "", "DISABLE", "SIMPLE":
		case "MUTUAL":
			if t.ClientCertificate == "" || t.PrivateKey == "" {
				errs = append(errs, errors.New("tlsSettings: MUTUAL needs clientCertificate and privateKey"))
			}
		default:
			errs = append(errs, fmt.Errorf("tlsSettings.mode: %q: want DISABLE, SIMPLE or MUTUAL", t.Mode))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("mcp upstream %q: %w", c.Name, errors.Join(errs...))
	}
	return nil
}

// typeURLs returns what c subscribes to.
func (c *UpstreamConfig) typeURLs() []string {
	if len(c.Kinds) == 0 {
		return DefaultTypeURLs()
	}
	out := make([]string, 0, len(c.Kinds))
	for _, k := range c.Kinds {
		if u, err := resolveKind(k); err == nil {
			out = append(out, u)
		}
	}
	return out
}

// transportCredentials reads the TLS files now, so a rotated certificate
// is picked up at the next reconnect.
func (c *UpstreamConfig) transportCredentials() (credentials.TransportCredentials, error) {
	t := c.TLSSettings
	if t == nil || t.Mode == "" || t.Mode == "DISABLE" {
		return insecure.NewCredentials(), nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.SNI}
	if t.CACertificates != "" {
		pem, err := os.ReadFile(t.CACertificates)
		if err != nil {
			return nil, fmt.Errorf("tlsSettings.caCertificates: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tlsSettings.caCertificates: %s holds no PEM certificate", t.CACertificates)
		}
		cfg.RootCAs = pool
	}
	if t.Mode == "MUTUAL" {
		cert, err := tls.LoadX509KeyPair(t.ClientCertificate, t.PrivateKey)
		if err != nil {
			return nil, fmt.Errorf("tlsSettings: client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return credentials.NewTLS(cfg), nil
}

// Options are the knobs of an Upstream beyond its config; zero values
// take the defaults.
type Options struct {
	Logger  *slog.Logger
	Metrics *Metrics
	// BackoffMin and BackoffMax bound the reconnect delay (doubling, with
	// ±25% jitter); defaults 200 ms and 30 s.
	BackoffMin, BackoffMax time.Duration
	// ResponseTimeout: a stream that has not answered every subscription
	// within it is given up and redialled; default 30 s.
	ResponseTimeout time.Duration
	// SyncTimeout: Synced is called after it even if the upstream has not
	// answered, so one dead upstream cannot hold the daemon back; default
	// 10 s.
	SyncTimeout time.Duration
	// DialOptions are added to the gRPC dial (tests).
	DialOptions []grpc.DialOption
}

func (o *Options) setDefaults() {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.BackoffMin <= 0 {
		o.BackoffMin = 200 * time.Millisecond
	}
	if o.BackoffMax <= 0 {
		o.BackoffMax = 30 * time.Second
	}
	if o.ResponseTimeout <= 0 {
		o.ResponseTimeout = 30 * time.Second
	}
	if o.SyncTimeout <= 0 {
		o.SyncTimeout = 10 * time.Second
	}
}
