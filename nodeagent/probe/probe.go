// Package probe runs a WorkloadGroup's health probe on the host, with
// Kubernetes' semantics (as Istio's agent runs it for a VM): httpGet,
// tcpSocket, exec or grpc; an initial delay, a period, a timeout, and
// success and failure thresholds that a state change needs. The result
// is reported to the control plane by nodeagent/health.
//
// It imports nothing of this module.
package probe

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// Spec is a probe, with the field names of Istio's ReadinessProbe (a
// WorkloadGroup's probe).
type Spec struct {
	HTTPGet   *HTTPGet   `yaml:"httpGet"`
	TCPSocket *TCPSocket `yaml:"tcpSocket"`
	Exec      *Exec      `yaml:"exec"`
	GRPC      *GRPC      `yaml:"grpc"`
	// InitialDelaySeconds before the first probe; PeriodSeconds between
	// probes (default 10); TimeoutSeconds for one (default 1);
	// SuccessThreshold consecutive successes make it healthy (default 1),
	// FailureThreshold consecutive failures unhealthy (default 3).
	InitialDelaySeconds int `yaml:"initialDelaySeconds"`
	PeriodSeconds       int `yaml:"periodSeconds"`
	TimeoutSeconds      int `yaml:"timeoutSeconds"`
	SuccessThreshold    int `yaml:"successThreshold"`
	FailureThreshold    int `yaml:"failureThreshold"`
}

// HTTPGet succeeds on a status from 200 to 399.
type HTTPGet struct {
	Path        string       `yaml:"path"`
	Port        int          `yaml:"port"`
	Host        string       `yaml:"host"`   // default 127.0.0.1
	Scheme      string       `yaml:"scheme"` // HTTP (default) or HTTPS (not verified, as Kubernetes)
	HTTPHeaders []HTTPHeader `yaml:"httpHeaders"`
}

// HTTPHeader is a header an httpGet probe sends.
type HTTPHeader struct {
	Name  string `yaml:"name"`
	Value string `yaml:"value"`
}

// TCPSocket succeeds when a connection opens.
type TCPSocket struct {
	Host string `yaml:"host"` // default 127.0.0.1
	Port int    `yaml:"port"`
}

// Exec succeeds when the command exits 0.
type Exec struct {
	Command []string `yaml:"command"`
}

// GRPC succeeds when the gRPC health service says SERVING.
type GRPC struct {
	Port    int    `yaml:"port"`
	Service string `yaml:"service"`
}

// Validate checks s and fills its defaults.
func (s *Spec) Validate() error {
	n := 0
	for _, set := range []bool{s.HTTPGet != nil, s.TCPSocket != nil, s.Exec != nil, s.GRPC != nil} {
		if set {
			n++
		}
	}
	switch {
	case n != 1:
		return fmt.Errorf("a probe needs exactly one of httpGet, tcpSocket, exec, grpc (has %d)", n)
	case s.HTTPGet != nil && (s.HTTPGet.Port <= 0 || s.HTTPGet.Port > 65535):
		return fmt.Errorf("httpGet.port %d is not a port", s.HTTPGet.Port)
	case s.HTTPGet != nil && s.HTTPGet.Scheme != "" && s.HTTPGet.Scheme != "HTTP" && s.HTTPGet.Scheme != "HTTPS":
		return fmt.Errorf("httpGet.scheme %q: HTTP or HTTPS", s.HTTPGet.Scheme)
	case s.TCPSocket != nil && (s.TCPSocket.Port <= 0 || s.TCPSocket.Port > 65535):
		return fmt.Errorf("tcpSocket.port %d is not a port", s.TCPSocket.Port)
	case s.Exec != nil && len(s.Exec.Command) == 0:
		return errors.New("exec.command is empty")
	case s.GRPC != nil && (s.GRPC.Port <= 0 || s.GRPC.Port > 65535):
		return fmt.Errorf("grpc.port %d is not a port", s.GRPC.Port)
	case s.InitialDelaySeconds < 0 || s.PeriodSeconds < 0 || s.TimeoutSeconds < 0 || s.SuccessThreshold < 0 || s.FailureThreshold < 0:
		return errors.New("probe times and thresholds cannot be negative")
	}
	if s.PeriodSeconds == 0 {
		s.PeriodSeconds = 10
	}
	if s.TimeoutSeconds == 0 {
		s.TimeoutSeconds = 1
	}
	if s.SuccessThreshold == 0 {
		s.SuccessThreshold = 1
	}
	if s.FailureThreshold == 0 {
		s.FailureThreshold = 3
	}
	return nil
}

// Check runs the probe once; nil is a success, else why it failed.
func (s *Spec) Check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(s.TimeoutSeconds)*time.Second)
	defer cancel()
	switch {
	case s.HTTPGet != nil:
		return s.HTTPGet.check(ctx)
	case s.TCPSocket != nil:
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host(s.TCPSocket.Host), strconv.Itoa(s.TCPSocket.Port)))
		if err != nil {
			return fmt.Errorf("tcpSocket: %w", err)
		}
		return c.Close()
	case s.Exec != nil:
		out, err := exec.CommandContext(ctx, s.Exec.Command[0], s.Exec.Command[1:]...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("exec %s: %v: %s", s.Exec.Command[0], err, strings.TrimSpace(string(out[:min(len(out), 200)])))
		}
		return nil
	case s.GRPC != nil:
		return s.GRPC.check(ctx)
	}
	return errors.New("no probe")
}

func host(h string) string {
	if h == "" {
		return "127.0.0.1"
	}
	return h
}

func (h *HTTPGet) check(ctx context.Context) error {
	scheme := "http"
	if h.Scheme == "HTTPS" {
		scheme = "https"
	}
	path := h.Path
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	url := scheme + "://" + net.JoinHostPort(host(h.Host), strconv.Itoa(h.Port)) + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("httpGet: %w", err)
	}
	req.Header.Set("User-Agent", "baremesh-agent-probe")
	for _, hd := range h.HTTPHeaders {
		if strings.EqualFold(hd.Name, "host") {
			req.Host = hd.Value
			continue
		}
		req.Header.Add(hd.Name, hd.Value)
	}
	// As Kubernetes: HTTPS is not verified, redirects are not followed.
	client := &http.Client{
		Transport:     &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, DisableKeepAlives: true}, //nolint:gosec // probes do not verify, as Kubernetes'
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("httpGet %s: %w", url, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 10<<10))
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return fmt.Errorf("httpGet %s: status %d", url, resp.StatusCode)
	}
	return nil
}

func (g *GRPC) check(ctx context.Context) error {
	cc, err := grpc.NewClient(net.JoinHostPort("127.0.0.1", strconv.Itoa(g.Port)), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("grpc: %w", err)
	}
	defer cc.Close()
	resp, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{Service: g.Service})
	if err != nil {
		return fmt.Errorf("grpc health %d: %w", g.Port, err)
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return fmt.Errorf("grpc health %d: %s", g.Port, resp.GetStatus())
	}
	return nil
}

// Run probes every period after the initial delay until ctx ends, and
// calls report when the state changes: healthy after SuccessThreshold
// consecutive successes, unhealthy (with the last failure) after
// FailureThreshold consecutive failures. The state starts unknown, so
// the first report comes once a threshold is met.
func (s *Spec) Run(ctx context.Context, report func(healthy bool, detail string)) {
	select {
	case <-ctx.Done():
		return
	case <-time.After(time.Duration(s.InitialDelaySeconds) * time.Second):
	}
	tick := time.NewTicker(time.Duration(s.PeriodSeconds) * time.Second)
	defer tick.Stop()
	var state *bool
	ok, bad := 0, 0
	for {
		err := s.Check(ctx)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			ok, bad = ok+1, 0
			if ok >= s.SuccessThreshold && (state == nil || !*state) {
				state = ptr(true)
				report(true, "")
			}
		} else {
			ok, bad = 0, bad+1
			if bad >= s.FailureThreshold && (state == nil || *state) {
				state = ptr(false)
				report(false, err.Error())
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func ptr[T any](v T) *T { return &v }
