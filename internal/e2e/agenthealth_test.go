package e2e

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/baremesh/baremesh/core/testkit"
	"github.com/baremesh/baremesh/nodeagent/health"
	"github.com/baremesh/baremesh/nodeagent/probe"
)

// TestAgentHealthReports (issue #15): baremesh-agent's health reporter
// runs the WorkloadGroup's probe beside a proxy that is not Istio's agent
// and reports over its own authenticated stream: the proxy's entry turns
// unhealthy and its endpoint leaves a real grpc-go client's EDS, then
// comes back; the reporter changes nothing else of the entry; a reporter
// authenticated as another service account is refused and the entry's
// health is untouched. The proxy is a raw ADS stream standing in for
// Envoy (there is no Envoy binary here); the probe target is a real
// HTTP server.
func TestAgentHealthReports(t *testing.T) {
	static, vm := startBackend(t, "static"), startBackend(t, "vm")
	m, stateDir := startIdentityMesh(t, vmFiles(static, vm))
	certFile, keyFile, rootFile := certFiles(t, stateDir, "default", "vm-sa")
	client := m.xdsClient(t, "client")
	seen := func(want string) func() bool {
		return func() bool {
			for i := 0; i < 20; i++ {
				if b, err := call(t.Context(), client); err == nil && b == want {
					return true
				}
			}
			return false
		}
	}
	// The workload's proxy registers it.
	if _, err := openADS(t, m, rootFile, certFile, keyFile, "", "sidecar~127.0.0.1~vm-1.default~default.svc.cluster.local", "vm"); err != nil {
		t.Fatal(err)
	}
	testkit.EventuallyWithin(t, e2eWait, "client reaches the registered VM", seen("vm"))

	var ready atomic.Bool
	ready.Store(true)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/ready" || r.Header.Get("X-Probe") != "baremesh" || !ready.Load() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
		}
	}))
	defer target.Close()
	port, _ := strconv.Atoi(target.URL[strings.LastIndexByte(target.URL, ':')+1:])
	cfg := health.Config{Address: m.d.TLSAddr(), Group: "vm", Namespace: "default", IP: "127.0.0.1",
		TLS: &health.TLSConfig{CACertificates: rootFile, ClientCertificate: certFile, PrivateKey: keyFile, ServerName: "127.0.0.1"},
		Probe: probe.Spec{HTTPGet: &probe.HTTPGet{Port: port, Path: "/ready", HTTPHeaders: []probe.HTTPHeader{{Name: "X-Probe", Value: "baremesh"}}},
			PeriodSeconds: 1, FailureThreshold: 1}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	r := health.New(cfg, log)
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(ctx) }()
	defer func() { cancel(); <-done }()

	entry := func() map[string]any {
		for _, reg := range registrations(t, m) {
			if reg["name"] == "vm-127.0.0.1" {
				return reg
			}
		}
		return nil
	}
	testkit.EventuallyWithin(t, e2eWait, "the reporter's first report (healthy)", func() bool { return entry()["health"] == "healthy" })
	if regs := registrations(t, m); len(regs) != 1 {
		t.Fatalf("the reporter made a second registration: %v", regs)
	}
	ready.Store(false)
	testkit.EventuallyWithin(t, e2eWait, "the entry unhealthy", func() bool { return entry()["health"] == "unhealthy" })
	dump := func() string {
		_, body := httpGet(t, "http://"+m.d.HTTPAddr()+"/debug/config_dump?proxy="+url.QueryEscape("sidecar~127.0.0.1~client.default~default.svc.cluster.local"))
		return body
	}
	vmPort := strconv.Itoa(vm.port)
	testkit.EventuallyWithin(t, e2eWait, "the unhealthy VM out of the client's EDS", func() bool { return !strings.Contains(dump(), vmPort) })
	allTo(t, t.Context(), client, "static")
	ready.Store(true)
	testkit.EventuallyWithin(t, e2eWait, "the VM back in the client's endpoints", seen("vm"))

	// Another service account reporting for this workload is refused.
	other, otherKey, _ := certFiles(t, stateDir, "default", "intruder")
	bad := cfg
	bad.TLS = &health.TLSConfig{CACertificates: rootFile, ClientCertificate: other, PrivateKey: otherKey, ServerName: "127.0.0.1"}
	bad.Probe = probe.Spec{Exec: &probe.Exec{Command: []string{"false"}}, PeriodSeconds: 1, FailureThreshold: 1}
	if err := bad.Validate(); err != nil {
		t.Fatal(err)
	}
	ictx, icancel := context.WithCancel(ctx)
	idone := make(chan struct{})
	go func() { defer close(idone); _ = health.New(bad, log).Run(ictx) }()
	testkit.EventuallyWithin(t, e2eWait, "the intruder refused for its service account", func() bool {
		_, body := httpGet(t, "http://"+m.d.HTTPAddr()+"/metrics")
		for _, l := range strings.Split(body, "\n") { // the series exists from the start, at 0
			if strings.HasPrefix(l, `baremesh_autoregistration_refusals_total{reason="service_account"} `) && !strings.HasSuffix(l, " 0") {
				return true
			}
		}
		return false
	})
	icancel()
	<-idone
	if e := entry(); e["health"] != "healthy" {
		t.Errorf("an intruder's report changed the entry: %v", e)
	}
}
