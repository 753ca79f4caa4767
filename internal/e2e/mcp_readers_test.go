package e2e

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/store"
	"github.com/baremesh/baremesh/core/testkit"
	"github.com/baremesh/baremesh/internal/daemonconfig"
	"github.com/baremesh/baremesh/sources/mcp"
)

// plaintextMCP opts a test's daemon in to plaintext MCP readers (an
// istiod or a baremeshd reading from the loopback xdsAddr).
func plaintextMCP(c *daemonconfig.Config) { c.AllowPlaintextMCPReaders = true }

// TestMCPReadersNeedIdentity (issue #24): the Istio config goes over MCP
// only to control-plane identities, as istiod's API generator with
// ENABLE_XDS_API_GENERATOR_AUTH: a reader on the TLS port with an
// istio-system certificate (the root namespace) or one listed in
// mcpReaders gets it; one of another namespace and a plaintext reader
// (no allowPlaintextMCPReaders) are answered, with nothing, and counted.
// The readers are sources/mcp clients, the same as baremeshd's own
// upstreams (istiod's over plaintext: TestIstiodReadsBaremeshOverMCP).
func TestMCPReadersNeedIdentity(t *testing.T) {
	bs := map[string]*backend{"a1": startBackend(t, "a1")}
	stateDir := t.TempDir()
	m := startMeshWith(t, map[string]string{"echo.yaml": echoService(bs, map[string]string{"a1": "v1"}), "vs.yaml": routes(100, 0, "")},
		func(c *daemonconfig.Config) {
			c.TLSAddr, c.StateDir, c.TLSSANs = "127.0.0.1:0", stateDir, []string{"127.0.0.1"}
			c.MCPReaders = []string{"mirror/*"}
		})
	read := func(name, ns string) mcp.Status {
		t.Helper()
		uc := mcp.UpstreamConfig{Name: name, Address: m.d.XDSAddr(), Kinds: []string{"VirtualService", "WorkloadEntry"}}
		if ns != "" {
			certFile, keyFile, rootFile := certFiles(t, stateDir, ns, "reader")
			uc.Address = m.d.TLSAddr()
			uc.NodeID = "sidecar~127.0.0.1~reader." + ns + "~" + ns + ".svc.cluster.local"
			uc.TLSSettings = &mcp.TLSSettings{Mode: "MUTUAL", CACertificates: rootFile, ClientCertificate: certFile, PrivateKey: keyFile, SNI: "127.0.0.1"}
		}
		agg := store.NewAggregate()
		u := mcp.New(uc, mcp.Options{Logger: slog.New(slog.DiscardHandler)}, agg.AddSource("mcp:"+name))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = u.Run(ctx) }()
		defer func() { cancel(); <-done }()
		testkit.EventuallyWithin(t, 20*time.Second, name+" answered", func() bool { return u.Status().Synced })
		st := u.Status()
		_, vs := agg.Get(config.VirtualService, "default", "echo")
		_, we := agg.Get(config.WorkloadEntry, "default", "a1")
		if vs != (st.Resources["VirtualService"] > 0) || we != (st.Resources["WorkloadEntry"] > 0) {
			t.Fatalf("%s: store and status disagree: %+v", name, st)
		}
		return st
	}
	for _, c := range []struct {
		name, ns string
		reads    bool
	}{
		{"root-namespace", "istio-system", true},
		{"listed", "mirror", true},
		{"other-namespace", "default", false},
		{"plaintext", "", false},
	} {
		st := read(c.name, c.ns)
		got := st.Resources["VirtualService"] > 0 && st.Resources["WorkloadEntry"] > 0
		if got != c.reads {
			t.Errorf("%s reader: got config %v (%v), want %v", c.name, got, st.Resources, c.reads)
		}
	}
	_, metrics := httpGet(t, "http://"+m.d.HTTPAddr()+"/metrics")
	for _, want := range []string{
		`baremesh_xds_reads_refused_total{reason="not_a_reader",type="mcp-virtualservice"} 1`,
		`baremesh_xds_reads_refused_total{reason="unauthenticated",type="mcp-virtualservice"} 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}
