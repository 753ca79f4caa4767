package observability

import (
	"bufio"
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	pb "istio.io/api/security/v1alpha1"

	"github.com/baremesh/baremesh/core/testkit"
	"github.com/baremesh/baremesh/internal/daemon"
	"github.com/baremesh/baremesh/internal/daemonconfig"
	"github.com/baremesh/baremesh/sources/mcp"
	"github.com/baremesh/baremesh/xdsserver/xdstype"
)

const serviceEntry = `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: NAME, namespace: shop}
spec:
  hosts: [NAME.shop.example.com]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.1.0.1}]
`

// deadKubeconfig points at a port nothing listens on: the cluster is
// configured and down.
const deadKubeconfig = `apiVersion: v1
kind: Config
clusters: [{name: east, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: east, context: {cluster: east, user: u}}]
current-context: east
`

// runDaemon starts a real baremeshd in process with every feature whose
// metrics the dashboard shows: a config directory, the CA on a TLS port, a
// one-replica cluster, a 1ns convergence objective (every change misses
// it) and one stream per connection; with deadSources, also a Kubernetes
// cluster and an MCP upstream that are down (such a daemon serves no
// config until they sync, so the xDS metrics come from one without).
// tweak, if not nil, changes the config last.
func runDaemon(t *testing.T, deadSources bool, tweak func(*daemonconfig.Config)) (*daemon.Daemon, string) {
	t.Helper()
	root := t.TempDir()
	conf, clusters, state := filepath.Join(root, "conf.d"), filepath.Join(root, "clusters"), filepath.Join(root, "state")
	for _, d := range []string{conf, clusters, state} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	write(t, filepath.Join(conf, "a.yaml"), strings.ReplaceAll(serviceEntry, "NAME", "a"))
	cfg := daemonconfig.Defaults()
	cfg.ConfigDirs, cfg.StateDir = []string{conf}, state
	if deadSources {
		write(t, filepath.Join(clusters, "east.yaml"), deadKubeconfig)
		cfg.Clusters = clusters
		cfg.MCP = []mcp.UpstreamConfig{{Name: "istiod", Address: "xds://127.0.0.1:1"}}
	}
	cfg.MeshConfig = filepath.Join(root, "meshconfig.yaml")
	cfg.XDSAddr, cfg.HTTPAddr, cfg.TLSAddr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	cfg.Cluster = daemonconfig.ClusterConfig{Name: "r1", Bind: "127.0.0.1:0"}
	cfg.ConvergenceSLO = daemonconfig.Duration{Duration: time.Nanosecond}
	cfg.MaxStreamsPerConnection = 1
	if tweak != nil {
		tweak(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	d, err := daemon.New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		start := time.Now()
		select {
		case <-done:
			t.Logf("daemon (dead sources: %v) stopped %v after cancel", deadSources, time.Since(start).Round(time.Millisecond))
		case <-time.After(60 * time.Second):
			t.Errorf("daemon (dead sources: %v) did not stop within 60s of cancel", deadSources)
		}
	})
	testkit.Eventually(t, "metrics served", func() bool { return strings.Contains(scrape(t, d), "baremesh_xds_connected_proxies") })
	return d, conf
}

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

func scrape(t *testing.T, d *daemon.Daemon) string {
	t.Helper()
	resp, err := http.Get("http://" + d.HTTPAddr() + "/metrics")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// families are the metric families in a scrape (its TYPE lines).
func families(text string) map[string]bool {
	out := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) >= 3 && f[0] == "#" && f[1] == "TYPE" {
			out[f[2]] = true
		}
	}
	return out
}

// needsEvent are the metrics whose first series needs an event that
// TestDashboardMetricsAreExposed does not cause (a vector has no series
// before its first use); for these the test checks that the daemon
// registers them. Each says what would make it appear.
var needsEvent = map[string]string{
	"baremesh_cluster_gossip_bytes_total":                   "gossip with a second replica",
	"baremesh_mcp_upstream_nacks_total":                     "a reachable MCP upstream sending bad config",
	"baremesh_mcp_upstream_last_response_timestamp_seconds": "a reachable MCP upstream",
}

// TestDashboardMetricsAreExposed runs a real baremeshd, drives it (an xDS
// client that ACKs, NACKs, is refused a second stream, asks for a secret it
// may not read and closes; a config change and a bad config file; an
// unauthenticated certificate request) and a second one whose Kubernetes
// cluster and MCP upstream are down, scrapes their /metrics, and checks that every metric
// the dashboard and the alert rules name is in the scrape, or, for the few
// in needsEvent, registered with the daemon.
func TestDashboardMetricsAreExposed(t *testing.T) {
	d, conf := runDaemon(t, false, nil)
	drive(t, d, conf)
	down, _ := runDaemon(t, true, nil)

	want := metricNames(dashboardExprs(loadDashboard(t)))
	for _, n := range metricNames(ruleExprs(t)) {
		if !slices.Contains(want, n) {
			want = append(want, n)
		}
	}
	slices.Sort(want)
	registered := append(d.MetricNames(), down.MetricNames()...)
	var fams map[string]bool
	var missing []string
	check := func() bool {
		fams, missing = families(scrape(t, d)+scrape(t, down)), nil
		for _, n := range want {
			base := n
			for _, suf := range []string{"_bucket", "_sum", "_count"} {
				if b, ok := strings.CutSuffix(n, suf); ok && (fams[b] || slices.Contains(registered, b)) {
					base = b
				}
			}
			_, later := needsEvent[base]
			if !fams[base] && !(later && slices.Contains(registered, base)) {
				missing = append(missing, n)
			}
		}
		return len(missing) == 0
	}
	deadline := time.Now().Add(20 * time.Second)
	for !check() && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond) // polling the scrape, with a deadline
	}
	if len(missing) > 0 {
		t.Fatalf("metrics named by the dashboard or the alert rules that baremeshd does not expose: %v", missing)
	}
	var onlyRegistered []string
	for _, n := range want {
		if !fams[n] && !fams[strings.TrimSuffix(n, "_bucket")] {
			onlyRegistered = append(onlyRegistered, n)
		}
	}
	t.Logf("%d metric names checked: %d in the scrape, registered but without a series yet: %v", len(want), len(want)-len(onlyRegistered), onlyRegistered)
}

// drive makes the daemon produce the series the dashboard shows.
func drive(t *testing.T, d *daemon.Daemon, conf string) {
	t.Helper()
	conn, err := grpc.NewClient(d.XDSAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ads := discovery.NewAggregatedDiscoveryServiceClient(conn)
	st, err := ads.StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	node := &corev3.Node{Id: "sidecar~10.0.0.9~vm1.shop~shop.svc.cluster.local"}
	send := func(r *discovery.DiscoveryRequest) {
		t.Helper()
		if err := st.Send(r); err != nil {
			t.Fatal(err)
		}
	}
	recv := func(typeURL string) *discovery.DiscoveryResponse {
		t.Helper()
		for {
			r, err := st.Recv()
			if err != nil {
				t.Fatalf("waiting for %s: %v", typeURL, err)
			}
			if r.TypeUrl == typeURL {
				return r
			}
		}
	}
	ack := func(r *discovery.DiscoveryResponse) {
		send(&discovery.DiscoveryRequest{TypeUrl: r.TypeUrl, VersionInfo: r.VersionInfo, ResponseNonce: r.Nonce})
	}
	send(&discovery.DiscoveryRequest{Node: node, TypeUrl: xdstype.Cluster.URL})
	ack(recv(xdstype.Cluster.URL))

	// A second stream on the connection: over maxStreamsPerConnection.
	st2, err := ads.StreamAggregatedResources(ctx)
	if err == nil {
		if err = st2.Send(&discovery.DiscoveryRequest{Node: node, TypeUrl: xdstype.Cluster.URL}); err == nil {
			_, err = st2.Recv()
		}
	}
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("second stream on one connection: %v, want RESOURCE_EXHAUSTED", err)
	}

	// A change: the new CDS is ACKed (convergence, and a miss of the 1ns
	// objective); a bad file is rejected.
	write(t, filepath.Join(conf, "b.yaml"), strings.ReplaceAll(serviceEntry, "NAME", "b"))
	ack(recv(xdstype.Cluster.URL))
	write(t, filepath.Join(conf, "bad.yaml"), "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: bad}\nspec: {hosts: []}\n")

	// LDS is NACKed.
	send(&discovery.DiscoveryRequest{TypeUrl: xdstype.Listener.URL})
	l := recv(xdstype.Listener.URL)
	send(&discovery.DiscoveryRequest{TypeUrl: l.TypeUrl, ResponseNonce: l.Nonce, ErrorDetail: &statuspb.Status{Code: int32(codes.InvalidArgument), Message: "test: refused"}})

	// A secret an unauthenticated stream may not read.
	send(&discovery.DiscoveryRequest{TypeUrl: xdstype.Secret.URL, ResourceNames: []string{"kubernetes://shop/web-cert"}})

	// An unauthenticated certificate request on the TLS port.
	caConn, err := grpc.NewClient(d.TLSAddr(), grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
		InsecureSkipVerify: true, // the request is meant to be refused; who serves it is not under test
	})))
	if err != nil {
		t.Fatal(err)
	}
	defer caConn.Close()
	if _, err := pb.NewIstioCertificateServiceClient(caConn).CreateCertificate(ctx, &pb.IstioCertificateRequest{Csr: "x"}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("CreateCertificate without credentials: %v, want UNAUTHENTICATED", err)
	}

	// The client closes its stream.
	if err := st.CloseSend(); err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := st.Recv(); err != nil {
			break
		}
	}
}
