package load

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/baremesh/baremesh/core/workloads"
	"github.com/baremesh/baremesh/internal/daemon"
	"github.com/baremesh/baremesh/internal/daemonconfig"
	"github.com/baremesh/baremesh/xdsserver/xdstype"
)

// BenchmarkHealthFlipToEDS is issue #15's health figure: with the
// daemon's default debounce, BAREMESH_HEALTH_PROXIES (300) proxies
// watching a service, an auto-registered VM's health report flips
// (unhealthy, then healthy, BAREMESH_HEALTH_FLIPS (5) times each): the
// time from the report to the last proxy's ACK of the EDS without (or
// with) the VM's endpoint. Target ≤ 1 s.
func BenchmarkHealthFlipToEDS(b *testing.B) {
	raiseNoFile(b)
	proxies, flips := envInt("BAREMESH_HEALTH_PROXIES", 300), envInt("BAREMESH_HEALTH_FLIPS", 5)
	dir := b.TempDir()
	for i := range 50 {
		writeFile(b, dir, svcName(i)+".yaml", serviceEntry(svcName(i), svcAddrs(i)...))
	}
	writeFile(b, dir, "vm.yaml", vmGroupYAML)
	cfg := daemonconfig.Defaults() // the default debounce (100 ms)
	cfg.ConfigDirs = []string{dir}
	cfg.XDSAddr, cfg.HTTPAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.MeshConfig = filepath.Join(dir, "no-meshconfig.yaml")
	cfg.StateDir = b.TempDir()                  // outside the watched directory
	cfg.AllowUnauthenticatedRegistration = true // plaintext on loopback; the TLS path is tested in internal/e2e
	d, err := daemon.New(cfg, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = d.Run(ctx) }()
	defer func() { cancel(); <-done }()
	<-d.Pipeline().Ready()

	// The VM's agent: registers and reports on one stream.
	cc, err := grpc.NewClient(d.XDSAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer cc.Close()
	st, err := discovery.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(ctx)
	if err != nil {
		b.Fatal(err)
	}
	md, _ := structpb.NewStruct(map[string]any{"AUTO_REGISTER_GROUP": "vm"})
	node := &corev3.Node{Id: "sidecar~10.77.0.1~vm-1.default~default.svc.cluster.local", Metadata: md}
	if err := st.Send(&discovery.DiscoveryRequest{Node: node, TypeUrl: xdstype.Listener.URL}); err != nil {
		b.Fatal(err)
	}
	f, err := Start(ctx, Options{Addr: d.XDSAddr(), Proxies: proxies, Mode: SotW})
	if err != nil {
		b.Fatal(err)
	}
	defer f.Stop()
	cluster := "outbound|80||vm.load.mesh"
	has := HasEndpoint(cluster, "10.77.0.1")
	wait := func(p Predicate, report func()) time.Duration {
		w := f.Expect(p)
		start := time.Now()
		report()
		wctx, wcancel := context.WithTimeout(ctx, time.Minute)
		defer wcancel()
		if err := w.Wait(wctx); err != nil {
			b.Fatal(err)
		}
		return w.Latencies(start).Percentiles().Max
	}
	send := func(unhealthy string) func() {
		return func() {
			r := &discovery.DiscoveryRequest{TypeUrl: workloads.HealthType}
			if unhealthy != "" {
				r.ErrorDetail = &statuspb.Status{Code: 14, Message: unhealthy}
			}
			if err := st.Send(r); err != nil {
				b.Fatal(err)
			}
		}
	}
	wait(has, func() {}) // registered, healthy: in every proxy's EDS
	var out, in []time.Duration
	for range flips {
		out = append(out, wait(func(v View) bool { return !has(v) }, send("probe failed")))
		in = append(in, wait(has, send("")))
	}
	slices.Sort(out)
	slices.Sort(in)
	fmt.Fprintf(os.Stderr, "health flip → last of %d proxies ACKed, default debounce, %d flips: unhealthy p50 %v max %v; healthy again p50 %v max %v\n",
		proxies, flips, out[len(out)/2].Round(time.Millisecond), out[len(out)-1].Round(time.Millisecond),
		in[len(in)/2].Round(time.Millisecond), in[len(in)-1].Round(time.Millisecond))
	b.ReportMetric(out[len(out)-1].Seconds(), "unhealthy_max_s")
	b.ReportMetric(in[len(in)-1].Seconds(), "healthy_max_s")
}

// vmGroupYAML is a VM service and the WorkloadGroup its proxies
// auto-register with (app: vm, port 8080).
const vmGroupYAML = `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: vm, namespace: default}
spec:
  hosts: [vm.load.mesh]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: STATIC
  workloadSelector: {labels: {app: vm}}
---
apiVersion: networking.istio.io/v1
kind: WorkloadGroup
metadata: {name: vm, namespace: default}
spec:
  metadata: {labels: {app: vm}}
  template: {ports: {http: 8080}}
`
