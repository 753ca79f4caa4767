package observability

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	pb "istio.io/api/security/v1alpha1"

	"github.com/baremesh/baremesh/core/testkit"
	"github.com/baremesh/baremesh/internal/daemon"
	"github.com/baremesh/baremesh/internal/daemonconfig"
	"github.com/baremesh/baremesh/xdsserver/xdstype"
)

// TestDashboardScreenshot makes docs/dashboard.png: a real baremeshd under
// a small load (xDS clients that ACK, a few that NACK, reconnects, config
// changes, a bad file, refused certificate requests), scraped by Debian's
// Prometheus (which also evaluates the alert rules), the dashboard's panels
// drawn from Prometheus by testdata/render.html, photographed by headless
// Chromium. Grafana itself is not packaged where this runs (README,
// Observability). It runs only with BAREMESH_SCREENSHOT=FILE.PNG (a few
// minutes; BAREMESH_SCREENSHOT_LOAD sets the load's duration, default 150s).
func TestDashboardScreenshot(t *testing.T) {
	out := os.Getenv("BAREMESH_SCREENSHOT")
	if out == "" {
		t.Skip("set BAREMESH_SCREENSHOT=docs/dashboard.png to make the screenshot (a few minutes)")
	}
	out, _ = filepath.Abs(out)
	prom, err1 := exec.LookPath("prometheus")
	chromium, err2 := exec.LookPath("chromium")
	if err1 != nil || err2 != nil {
		t.Skipf("needs Debian's prometheus and chromium (hack/deps.d/60-observability.sh): %v %v", err1, err2)
	}
	load := 150 * time.Second
	if s := os.Getenv("BAREMESH_SCREENSHOT_LOAD"); s != "" {
		var err error
		if load, err = time.ParseDuration(s); err != nil {
			t.Fatal(err)
		}
	}
	d, conf := runDaemon(t, false, func(c *daemonconfig.Config) {
		c.ConvergenceSLO = daemonconfig.Duration{Duration: 250 * time.Millisecond} // tight, so the SLO panel has misses to show
		c.MaxStreamsPerConnection = 100
	})
	promAddr := startPrometheus(t, prom, d.HTTPAddr())
	testkit.EventuallyWithin(t, time.Minute, "prometheus scrapes baremeshd", func() bool {
		r, err := http.Get("http://" + promAddr + "/api/v1/query?query=up%7Bjob%3D%22baremesh%22%7D%3D%3D1")
		if err != nil {
			return false
		}
		defer r.Body.Close()
		b, _ := io.ReadAll(r.Body)
		return strings.Contains(string(b), `"instance"`)
	})
	start := time.Now()
	stop := runLoad(t, d, conf, load) // the clients stay connected for the picture
	defer stop()
	time.Sleep(5 * time.Second) // let the last scrape in: observation time for Prometheus, not synchronisation
	end := time.Now()

	// The page, the dashboard and Prometheus's API on one origin.
	target, _ := url.Parse("http://" + promAddr)
	mux := http.NewServeMux()
	mux.Handle("/api/", httputil.NewSingleHostReverseProxy(target))
	mux.HandleFunc("/dashboard.json", func(w http.ResponseWriter, r *http.Request) { http.ServeFile(w, r, dashboardFile) })
	mux.HandleFunc("/render.html", func(w http.ResponseWriter, r *http.Request) { http.ServeFile(w, r, "testdata/render.html") })
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(func() { _ = srv.Close() })

	height := 70
	for _, p := range loadDashboard(t).Panels {
		height = max(height, 70+(p.GridPos.Y+p.GridPos.H)*30)
	}
	rng := int(end.Sub(start).Seconds()) + 10
	page := fmt.Sprintf("http://%s/render.html?range=%d&rate=30s&end=%d", lis.Addr(), rng, end.Unix())
	tmp := filepath.Join(t.TempDir(), "shot.png")
	cmd := exec.Command(chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
		"--user-data-dir="+t.TempDir(), fmt.Sprintf("--window-size=1600,%d", height),
		"--virtual-time-budget=20000", "--screenshot="+tmp, page)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("chromium: %v\n%s", err, b)
	}
	st, err := os.Stat(tmp)
	if err != nil || st.Size() < 50_000 {
		t.Fatalf("screenshot %s: %v (%v bytes)", tmp, err, st)
	}
	b, _ := os.ReadFile(tmp)
	if err := os.WriteFile(out, b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot %s: %d bytes, %d s of load, Prometheus %s", out, len(b), int(load.Seconds()), promAddr)
}

// startPrometheus runs Debian's Prometheus on a free port, scraping
// target every 2 s as job baremesh and evaluating the shipped alert rules.
func startPrometheus(t *testing.T, bin, target string) string {
	t.Helper()
	dir := t.TempDir()
	rules, _ := filepath.Abs(filepath.Join(rulesDir, rulesFile))
	cfg := fmt.Sprintf("global: {scrape_interval: 2s, evaluation_interval: 2s}\nrule_files: [%q]\nscrape_configs:\n- job_name: baremesh\n  static_configs: [{targets: [%q]}]\n", rules, target)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr)
	logf, _ := os.Create(filepath.Join(dir, "prometheus.log"))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait(); logf.Close() })
	return addr
}

// runLoad drives d for dur: 40 xDS clients (CDS and LDS; 3 of them NACK
// every LDS), a new ServiceEntry every 4 s, a short-lived client every
// 2 s, an unauthenticated certificate request every 3 s, and a bad config
// file for the middle third. The 40 stay connected until stop (at the
// latest a minute after dur): bounded in time, stops by itself.
func runLoad(t *testing.T, d *daemon.Daemon, conf string, dur time.Duration) (stop func()) {
	t.Helper()
	clients, stopClients := context.WithTimeout(context.Background(), dur+time.Minute)
	ctx, cancel := context.WithTimeout(clients, dur)
	defer cancel()
	var wg sync.WaitGroup
	client := func(i int, nack bool, life time.Duration) {
		defer wg.Done()
		cctx, ccancel := context.WithTimeout(clients, life)
		defer ccancel()
		conn, err := grpc.NewClient(d.XDSAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return
		}
		defer conn.Close()
		st, err := discovery.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(cctx)
		if err != nil {
			return
		}
		node := &corev3.Node{Id: fmt.Sprintf("sidecar~10.0.1.%d~vm%d.shop~shop.svc.cluster.local", i%250+1, i)}
		if st.Send(&discovery.DiscoveryRequest{Node: node, TypeUrl: xdstype.Cluster.URL}) != nil ||
			st.Send(&discovery.DiscoveryRequest{TypeUrl: xdstype.Listener.URL}) != nil {
			return
		}
		for {
			r, err := st.Recv()
			if err != nil {
				return
			}
			req := &discovery.DiscoveryRequest{TypeUrl: r.TypeUrl, VersionInfo: r.VersionInfo, ResponseNonce: r.Nonce}
			if nack && r.TypeUrl == xdstype.Listener.URL {
				req.VersionInfo = ""
				req.ErrorDetail = &statuspb.Status{Code: int32(codes.InvalidArgument), Message: "load: refused"}
			}
			if st.Send(req) != nil {
				return
			}
		}
	}
	for i := range 40 {
		wg.Add(1)
		go client(i, i < 3, dur+time.Minute)
	}
	caConn, err := grpc.NewClient(d.TLSAddr(), grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
		InsecureSkipVerify: true, // the requests are meant to be refused; who serves them is not under test
	})))
	if err != nil {
		t.Fatal(err)
	}
	defer caConn.Close()
	ca := pb.NewIstioCertificateServiceClient(caConn)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	bad := filepath.Join(conf, "bad.yaml")
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return func() { stopClients(); wg.Wait() }
		case <-tick.C:
		}
		secs := int(dur.Seconds())
		if n%4 == 0 {
			write(t, filepath.Join(conf, fmt.Sprintf("svc-%d.yaml", n)), strings.ReplaceAll(serviceEntry, "NAME", fmt.Sprintf("svc-%d", n)))
		}
		if n%2 == 0 {
			wg.Add(1)
			go client(100+n, false, 3*time.Second)
		}
		if n%3 == 0 {
			_, _ = ca.CreateCertificate(ctx, &pb.IstioCertificateRequest{Csr: "x"})
		}
		switch {
		case n == secs/3:
			write(t, bad, "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: bad}\nspec: {hosts: []}\n")
		case n == 2*secs/3:
			_ = os.Remove(bad)
		}
	}
}
