package load

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
)

// BenchmarkConnectStormTLSServer is the connect storm with baremeshd as
// its own process, so the server's share is measured apart from the
// client's: after a warm-up storm, for each of plaintext and TLS (ABBA
// order) the time until all BAREMESH_SCALE_PROXIES (2,000) proxies are
// configured and the CPU seconds the daemon spent meanwhile. On one machine the client's
// TLS (its handshakes and decryption, which in a fleet run on the
// proxies' own hosts) competes with the daemon for the same cores; the
// daemon's CPU ratio is what TLS costs the server. With
// BAREMESH_DAEMON_CPUS=0 and the benchmark run under `taskset -c 1`,
// daemon and client get a core each. BAREMESH_STORM_STREAMS_PER_CONN as
// in BenchmarkConnectStormTLS. BAREMESH_STORM_CPUPROFILE=FILE writes
// the daemon's CPU profile of the first TLS storm's first seconds
// (BAREMESH_STORM_CPUPROFILE_SECONDS, 4) to FILE.
func BenchmarkConnectStormTLSServer(b *testing.B) {
	raiseNoFile(b)
	proxies := envInt("BAREMESH_SCALE_PROXIES", 2000)
	perConn := envInt("BAREMESH_STORM_STREAMS_PER_CONN", 100)
	state := filepath.Join(b.TempDir(), "state")
	d := startProcess(b, envInt("BAREMESH_SCALE_SERVICES", 1000), "--tls-addr", "127.0.0.1:0", "--state-dir", state)
	defer d.stop()
	if d.tls == "" {
		b.Fatalf("baremeshd serves no TLS port:\n%s", d.lastLines())
	}
	creds := clientTLS(b, state, "istiod.istio-system.svc")
	storm := func(addr string, extra ...grpc.DialOption) (wall time.Duration, cpu float64) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		cpu0, start := d.cpu(), time.Now()
		f, err := Start(ctx, Options{Addr: addr, Proxies: proxies, Mode: SotW, StreamsPerConn: perConn, DialOptions: extra})
		if err != nil {
			b.Fatal(err)
		}
		defer f.Stop()
		if _, err := f.WaitConfigured(ctx); err != nil {
			b.Fatalf("%s: %v", addr, err)
		}
		return time.Since(start), d.cpu() - cpu0
	}
	tlsOpt := grpc.WithTransportCredentials(creds)
	// The daemon's first storm also fills its caches and grows its
	// heap (it varied 2–7× between runs here): not counted.
	storm(d.xds)
	p1, pc1 := storm(d.xds)
	stopProfile := d.profileTo(b, os.Getenv("BAREMESH_STORM_CPUPROFILE"))
	s1, sc1 := storm(d.tls, tlsOpt)
	stopProfile()
	s2, sc2 := storm(d.tls, tlsOpt)
	p2, pc2 := storm(d.xds)
	plain, secure := (p1+p2)/2, (s1+s2)/2
	plainCPU, secureCPU := (pc1+pc2)/2, (sc1+sc2)/2
	fmt.Fprintf(os.Stderr, "runs: plaintext %.2fs (daemon CPU %.2fs) %.2fs (%.2fs), TLS %.2fs (%.2fs) %.2fs (%.2fs)\n",
		p1.Seconds(), pc1, p2.Seconds(), pc2, s1.Seconds(), sc1, s2.Seconds(), sc2)
	fmt.Fprintf(os.Stderr, "connect storm, daemon as its own process, %d proxies, %d streams per connection: configured plaintext %.2fs, TLS %.2fs (%.2f×); daemon CPU plaintext %.2fs, TLS %.2fs (%.2f×)\n",
		proxies, perConn, plain.Seconds(), secure.Seconds(), secure.Seconds()/plain.Seconds(), plainCPU, secureCPU, secureCPU/plainCPU)
	b.ReportMetric(secure.Seconds()/plain.Seconds(), "tls/plaintext")
	b.ReportMetric(secureCPU/plainCPU, "daemon_cpu_tls/plaintext")
	b.ReportMetric(plainCPU, "daemon_cpu_plaintext_s")
	b.ReportMetric(secureCPU, "daemon_cpu_tls_s")
}

// profileTo starts a CPU profile of the daemon's next seconds (its
// /debug/pprof) written to file; the returned func waits for the file.
// An empty file profiles nothing.
func (d *daemonProc) profileTo(tb testing.TB, file string) (stop func()) {
	if file == "" {
		return func() {}
	}
	seconds := envInt("BAREMESH_STORM_CPUPROFILE_SECONDS", 4)
	done := make(chan struct{})
	go func() {
		defer close(done)
		resp, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", d.http, seconds))
		if err != nil {
			tb.Errorf("profile: %v", err)
			return
		}
		defer resp.Body.Close()
		out, err := os.Create(file)
		if err != nil {
			tb.Errorf("profile: %v", err)
			return
		}
		defer out.Close()
		if _, err := io.Copy(out, resp.Body); err != nil {
			tb.Errorf("profile: %v", err)
		}
	}()
	return func() { <-done }
}
