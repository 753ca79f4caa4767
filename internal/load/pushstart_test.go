package load

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/baremesh/baremesh/internal/daemon"
	"github.com/baremesh/baremesh/internal/daemonconfig"
)

// BenchmarkWriteToPush (issue #30: push start after a write at most
// istiod's, 0.125-0.132 s for a new service at the default debounce):
// an in-process baremeshd with 1,000 ServiceEntries and the default
// debounce (100 ms, leading edge on) and file coalescing, one proxy per
// mode (SotW, then Delta); each iteration writes a new ServiceEntry and
// reports how long until the push starts (the xDS server takes the push:
// /debug/pushz's time), until the proxy has the new cluster, and until
// it has ACKed the new service's cluster, endpoints and route. Each
// write is a lone change, as istiod's figure is: it comes a debounce
// period after the proxy has everything of the one before (back to back,
// a write found the previous push's EDS and RDS still being sent, or fell
// inside its debounce period).
func BenchmarkWriteToPush(b *testing.B) {
	b.Setenv("BAREMESH_CACHE_ASSERT", "0") // measured, not checked
	dir := b.TempDir()
	const services = 1000
	for i := range services {
		writeFile(b, dir, svcName(i)+".yaml", serviceEntry(svcName(i), svcAddrs(i)...))
	}
	cfg := daemonconfig.Defaults()
	cfg.ConfigDirs = []string{dir}
	cfg.XDSAddr, cfg.HTTPAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.MeshConfig = filepath.Join(dir, "no-meshconfig.yaml")
	d, err := daemon.New(cfg, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = d.Run(ctx) }()
	defer func() { cancel(); <-done }()
	select {
	case <-d.Pipeline().Ready():
	case <-time.After(2 * time.Minute):
		b.Fatal("daemon not ready")
	}
	next := services + 1 // the next new service's index, across modes
	for _, mode := range []Mode{SotW, Delta} {
		b.Run(string(mode), func(b *testing.B) {
			f, err := Start(ctx, Options{Addr: d.XDSAddr(), Proxies: 1, Mode: mode})
			if err != nil {
				b.Fatal(err)
			}
			defer f.Stop()
			if _, err := f.WaitConfigured(ctx); err != nil {
				b.Fatal(err)
			}
			var starts, clusters, arrivals []time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				k := next
				next++
				n := svcName(k)
				cds := f.Expect(func(v View) bool { return v.Cluster(cluster80(n)) != nil })
				w := f.Expect(All(
					func(v View) bool { return v.Cluster(cluster80(n)) != nil },
					HasEndpoint(cluster80(n), svcAddrs(k)[0]),
					HasRouteDomain(host(n)),
				))
				before := time.Now()
				writeFile(b, dir, n+".yaml", serviceEntry(n, svcAddrs(k)...))
				wctx, wcancel := context.WithTimeout(ctx, time.Minute)
				err := w.Wait(wctx)
				wcancel()
				if err != nil {
					b.Fatalf("new service %s: %v", n, err)
				}
				arrivals = append(arrivals, time.Since(before))
				clusters = append(clusters, minLatency(cds.Latencies(before)))
				for _, p := range d.XDS().Pushes() {
					if p.Full && p.At.After(before) && slices.Contains(p.Configs, "ServiceEntry/default/"+n) {
						starts = append(starts, p.At.Sub(before))
						break
					}
				}
				b.StopTimer()
				time.Sleep(cfg.Debounce.Duration) // the next write is a lone change (the scenario, not a wait for a condition)
				b.StartTimer()
			}
			b.StopTimer()
			if len(starts) > 0 {
				b.ReportMetric(float64(median(starts).Microseconds())/1000, "push-start-ms")
			}
			b.ReportMetric(float64(median(clusters).Microseconds())/1000, "proxy-has-cluster-ms")
			b.ReportMetric(float64(median(arrivals).Microseconds())/1000, "proxy-has-it-ms")
			b.Logf("%s: write -> push start %v; write -> the proxy has the cluster %v; has the cluster, endpoints and route %v", mode, rounded(starts), rounded(clusters), rounded(arrivals))
		})
	}
}
