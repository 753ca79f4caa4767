// Package health reports a workload's probe results to baremeshd the way
// Istio's agent does: on an ADS stream, as requests of type
// istio.v1.HealthInformation (with an error_detail when unhealthy). It
// is for hosts that run Envoy without Istio's agent: baremesh-agent
// opens its own stream with the workload's node identity (the same
// AUTO_REGISTER_GROUP, namespace and IP) and the metadata
// BAREMESH_HEALTH_REPORTER, so baremeshd attaches the stream to the
// workload's auto-registered entry without changing it (README
// "Health probes from baremesh-agent").
//
// It imports nodeagent/probe of this module, nothing else.
package health

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/baremesh/baremesh/nodeagent/probe"
)

// TypeURL is the type of Istio's health reports.
const TypeURL = "type.googleapis.com/istio.v1.HealthInformation"

// MetadataReporter marks a stream that only reports health.
const MetadataReporter = "BAREMESH_HEALTH_REPORTER"

// Config is the agent's health section.
type Config struct {
	// Address is baremeshd's xDS address: its TLS port (with TLS below)
	// or the loopback plaintext port.
	Address string `yaml:"address"`
	// TLS, when set, authenticates the stream with the workload's
	// certificate (as the proxy's): required on the TLS port.
	TLS *TLSConfig `yaml:"tls"`
	// Group is the WorkloadGroup (AUTO_REGISTER_GROUP), Namespace its
	// namespace, IP the workload's address (the entry is GROUP-IP), and
	// Network its network, as the proxy's node says them.
	Group     string `yaml:"group"`
	Namespace string `yaml:"namespace"`
	IP        string `yaml:"ip"`
	Network   string `yaml:"network"`
	// Probe is the WorkloadGroup's probe.
	Probe probe.Spec `yaml:"probe"`
}

// TLSConfig names the workload certificate files (PEM).
type TLSConfig struct {
	CACertificates    string `yaml:"caCertificates"`
	ClientCertificate string `yaml:"clientCertificate"`
	PrivateKey        string `yaml:"privateKey"`
	// ServerName is the name the server's certificate must carry
	// (default istiod.istio-system.svc, as Istio's agent checks).
	ServerName string `yaml:"serverName"`
}

// Validate checks c and fills defaults.
func (c *Config) Validate() error {
	var errs []error
	if c.Address == "" {
		errs = append(errs, errors.New("health.address is required"))
	}
	if c.Group == "" || c.Namespace == "" || c.IP == "" {
		errs = append(errs, errors.New("health.group, health.namespace and health.ip are required (the workload's entry is GROUP-IP in NAMESPACE)"))
	}
	if t := c.TLS; t != nil && (t.CACertificates == "" || t.ClientCertificate == "" || t.PrivateKey == "") {
		errs = append(errs, errors.New("health.tls needs caCertificates, clientCertificate and privateKey"))
	}
	if err := c.Probe.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("health.probe: %w", err))
	}
	return errors.Join(errs...)
}

// Node is the node the reporter's stream presents.
func (c *Config) Node() *corev3.Node {
	md := map[string]any{"AUTO_REGISTER_GROUP": c.Group, "NAMESPACE": c.Namespace, MetadataReporter: "true", "INSTANCE_IPS": c.IP}
	if c.Network != "" {
		md["NETWORK"] = c.Network
	}
	s, _ := structpb.NewStruct(md)
	return &corev3.Node{Id: fmt.Sprintf("sidecar~%s~%s-health.%s~%s.svc.cluster.local", c.IP, c.Group, c.Namespace, c.Namespace), Metadata: s}
}

// Reporter keeps a stream to baremeshd and reports the probe's state.
type Reporter struct {
	cfg Config
	log *slog.Logger

	mu      sync.Mutex
	state   *report // the last probe result (nil: none yet)
	changed chan struct{}
	sent    int
}

type report struct {
	healthy bool
	detail  string
}

// New returns a reporter for a validated cfg.
func New(cfg Config, log *slog.Logger) *Reporter {
	return &Reporter{cfg: cfg, log: log, changed: make(chan struct{}, 1)}
}

// Sent is how many reports went out (for status).
func (r *Reporter) Sent() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sent
}

// Run probes and reports until ctx ends, reconnecting with backoff.
func (r *Reporter) Run(ctx context.Context) error {
	go r.cfg.Probe.Run(ctx, func(healthy bool, detail string) {
		r.log.Info("workload health changed", "healthy", healthy, "detail", detail)
		r.mu.Lock()
		r.state = &report{healthy, detail}
		r.mu.Unlock()
		select {
		case r.changed <- struct{}{}:
		default:
		}
	})
	backoff := 200 * time.Millisecond
	for ctx.Err() == nil {
		start := time.Now()
		err := r.stream(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if time.Since(start) > 30*time.Second {
			backoff = 200 * time.Millisecond
		}
		r.log.Warn("health stream ended; reconnecting", "address", r.cfg.Address, "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
	}
	return nil
}

// stream runs one ADS stream: the state now, then every change.
func (r *Reporter) stream(ctx context.Context) error {
	creds, err := r.creds()
	if err != nil {
		return err
	}
	cc, err := grpc.NewClient(r.cfg.Address, grpc.WithTransportCredentials(creds))
	if err != nil {
		return err
	}
	defer cc.Close()
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := discovery.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(sctx)
	if err != nil {
		return err
	}
	ended := make(chan error, 1)
	go func() {
		for {
			if _, err := st.Recv(); err != nil {
				ended <- err
				return
			}
		}
	}()
	// Nothing is sent before the probe has a result: a report without
	// an error_detail says healthy. The first report names the node.
	node := r.cfg.Node()
	var last *report
	for {
		r.mu.Lock()
		s := r.state
		r.mu.Unlock()
		if s != nil && s != last {
			req := &discovery.DiscoveryRequest{TypeUrl: TypeURL}
			if last == nil {
				req.Node = node
			}
			if !s.healthy {
				req.ErrorDetail = &statuspb.Status{Code: 14, Message: s.detail} // UNAVAILABLE, as Istio's agent
			}
			if err := st.Send(req); err != nil {
				return err
			}
			last = s
			r.mu.Lock()
			r.sent++
			r.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return nil
		case err := <-ended:
			return err
		case <-r.changed:
		}
	}
}

// creds are the stream's transport credentials.
func (r *Reporter) creds() (credentials.TransportCredentials, error) {
	t := r.cfg.TLS
	if t == nil {
		return insecure.NewCredentials(), nil
	}
	pair, err := tls.LoadX509KeyPair(t.ClientCertificate, t.PrivateKey)
	if err != nil {
		return nil, fmt.Errorf("health.tls: %w", err)
	}
	ca, err := os.ReadFile(t.CACertificates)
	if err != nil {
		return nil, fmt.Errorf("health.tls: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("health.tls: %s holds no PEM certificate", t.CACertificates)
	}
	name := t.ServerName
	if name == "" {
		name = "istiod.istio-system.svc"
	}
	return credentials.NewTLS(&tls.Config{RootCAs: pool, ServerName: strings.TrimSpace(name), Certificates: []tls.Certificate{pair}}), nil
}
