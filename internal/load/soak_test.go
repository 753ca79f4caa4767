package load

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/baremesh/baremesh/xdsserver/xdstype"
)

// TestSoak (issue #11): baremeshd as its own process, 2,000 proxies for
// BAREMESH_SOAK (e.g. 30m; skipped without it), a config file changed
// every second, and 5% of the clients misbehaving: a third never read
// (reopened every 90 s, past the send timeout), a third NACK everything,
// a third reconnect in a loop (10/s each). Every change must reach every
// well-behaved proxy; the daemon's RSS must stay within ±10% of its
// value after the warm-up and its goroutines must not grow. Prints the
// curves (every sample) and the verdicts.
func TestSoak(t *testing.T) {
	dur, err := time.ParseDuration(os.Getenv("BAREMESH_SOAK"))
	if err != nil {
		t.Skip("set BAREMESH_SOAK=30m to run the soak (issue #11)")
	}
	proxies := envInt("BAREMESH_SOAK_PROXIES", 2000)
	bad := proxies / 20
	good := proxies - bad
	services := envInt("BAREMESH_SOAK_SERVICES", 100)
	raiseNoFile(t)
	d := startProcess(t, services)
	defer d.stop()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f, err := Start(ctx, Options{Addr: d.xds, Proxies: good, Mode: SotW})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Stop()
	wctx, wcancel := context.WithTimeout(ctx, 5*time.Minute)
	if _, err := f.WaitConfigured(wctx); err != nil {
		wcancel()
		t.Fatalf("fleet not configured: %v\n%s", err, d.lastLines())
	}
	wcancel()

	var mis sync.WaitGroup
	var counts misbehaviour
	for i := range bad {
		mis.Add(1)
		go func() {
			defer mis.Done()
			switch i % 3 {
			case 0:
				neverRead(ctx, d.xds, i, &counts)
			case 1:
				nackAll(ctx, d.xds, i, &counts)
			default:
				reconnectLoop(ctx, d.xds, i, &counts)
			}
		}()
	}
	defer mis.Wait()
	defer cancel()

	type sample struct {
		at               time.Duration
		rss              float64
		goroutines, open float64
	}
	var samples []sample
	begin := time.Now()
	take := func() {
		m := scrape(d.http)
		samples = append(samples, sample{time.Since(begin).Round(time.Second), d.status("VmRSS"), m["go_goroutines"], m["baremesh_xds_connected_proxies"]})
	}
	take()
	var lat []time.Duration
	misses := 0
	tick := time.NewTicker(time.Second) // the change cadence, not synchronisation
	defer tick.Stop()
	lastSample := time.Now()
	for gen := 1; time.Since(begin) < dur; gen++ {
		i := gen % services
		addrs := svcAddrs(i)
		addrs[0] = fmt.Sprintf("10.250.%d.%d", (gen>>8)&255, gen&255)
		w := f.Expect(HasEndpoint(cluster80(svcName(i)), addrs[0]))
		start := time.Now()
		writeFile(t, d.conf, svcName(i)+".yaml", serviceEntry(svcName(i), addrs...))
		cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
		err := w.Wait(cctx)
		ccancel()
		if err != nil {
			misses++
			t.Logf("change %d (%s) not converged within 10 s: %v", gen, svcName(i), err)
		} else {
			lat = append(lat, time.Since(start))
		}
		if time.Since(lastSample) >= 10*time.Second {
			take()
			lastSample = time.Now()
		}
		<-tick.C
	}
	take()
	tot := f.Totals()

	t.Logf("soak %v: %d well-behaved proxies, %d misbehaving (never read %d opens, NACK-all %d NACKs, reconnect loop %d reconnects)",
		dur, good, bad, counts.opens.Load(), counts.nacks.Load(), counts.reconnects.Load())
	slices.Sort(lat)
	if len(lat) > 0 {
		t.Logf("changes: %d converged, %d missed; change→all %d ACKed p50 %v p99 %v max %v; fleet NACKs %d reconnects %d",
			len(lat), misses, good, lat[len(lat)/2].Round(time.Millisecond), lat[len(lat)*99/100].Round(time.Millisecond),
			lat[len(lat)-1].Round(time.Millisecond), tot.Nacks, tot.Reconnects)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%8s %9s %11s %8s\n", "t", "RSS MB", "goroutines", "streams")
	for _, s := range samples {
		fmt.Fprintf(&b, "%8v %9.0f %11.0f %8.0f\n", s.at, s.rss, s.goroutines, s.open)
	}
	t.Logf("daemon curve:\n%s", b.String())
	// Warm-up: the first minute (caches, GC target, misbehavers settling).
	ref := samples[0]
	for _, s := range samples {
		if s.at >= time.Minute {
			ref = s
			break
		}
	}
	mid, end := samples[len(samples)/2], samples[len(samples)-1]
	t.Logf("start (after warm-up) %v: RSS %.0f MB, %.0f goroutines; middle %v: %.0f MB, %.0f; end %v: %.0f MB, %.0f",
		ref.at, ref.rss, ref.goroutines, mid.at, mid.rss, mid.goroutines, end.at, end.rss, end.goroutines)
	if end.rss > ref.rss*1.10 || end.rss < ref.rss*0.90 {
		t.Errorf("RSS moved from %.0f MB to %.0f MB (more than ±10%%)", ref.rss, end.rss)
	}
	if end.goroutines > ref.goroutines*1.10+50 {
		t.Errorf("goroutines grew from %.0f to %.0f", ref.goroutines, end.goroutines)
	}
	if misses > 0 {
		t.Errorf("%d changes did not reach every well-behaved proxy within 10 s", misses)
	}
}

// misbehaviour counts what the misbehaving clients did.
type misbehaviour struct{ opens, nacks, reconnects atomic.Int64 }

func soakNode(i int) *corev3.Node {
	return &corev3.Node{Id: fmt.Sprintf("sidecar~10.98.%d.%d~bad-%d.default~default.svc.cluster.local", i>>8, i&255, i)}
}

func soakConn(addr string, opts ...grpc.DialOption) (discovery.AggregatedDiscoveryServiceClient, func(), error) {
	cc, err := grpc.NewClient(addr, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(1 << 30))}, opts...)...)
	if err != nil {
		return nil, nil, err
	}
	return discovery.NewAggregatedDiscoveryServiceClient(cc), func() { cc.Close() }, nil
}

// neverRead subscribes to every cluster and endpoint and never reads;
// every 90 s (past the daemon's 60 s send timeout) it opens afresh.
func neverRead(ctx context.Context, addr string, i int, n *misbehaviour) {
	for ctx.Err() == nil {
		c, closeConn, err := soakConn(addr, grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
		if err != nil {
			return
		}
		sctx, cancel := context.WithTimeout(ctx, 90*time.Second)
		if st, err := c.StreamAggregatedResources(sctx); err == nil {
			n.opens.Add(1)
			_ = st.Send(&discovery.DiscoveryRequest{Node: soakNode(i), TypeUrl: xdstype.Cluster.URL})
			_ = st.Send(&discovery.DiscoveryRequest{Node: soakNode(i), TypeUrl: xdstype.Endpoint.URL})
		}
		<-sctx.Done()
		cancel()
		closeConn()
	}
}

// nackAll subscribes to every cluster and endpoint and NACKs every
// response it gets.
func nackAll(ctx context.Context, addr string, i int, n *misbehaviour) {
	for ctx.Err() == nil {
		c, closeConn, err := soakConn(addr)
		if err != nil {
			return
		}
		if st, err := c.StreamAggregatedResources(ctx); err == nil {
			_ = st.Send(&discovery.DiscoveryRequest{Node: soakNode(i), TypeUrl: xdstype.Cluster.URL})
			_ = st.Send(&discovery.DiscoveryRequest{Node: soakNode(i), TypeUrl: xdstype.Endpoint.URL})
			for {
				r, err := st.Recv()
				if err != nil {
					break
				}
				n.nacks.Add(1)
				if st.Send(&discovery.DiscoveryRequest{Node: soakNode(i), TypeUrl: r.GetTypeUrl(), ResponseNonce: r.GetNonce(),
					ErrorDetail: &statuspb.Status{Code: 3, Message: "soak: this client rejects everything"}}) != nil {
					break
				}
			}
		}
		closeConn()
	}
}

// reconnectLoop connects, takes one listener response and hangs up,
// over and over, ten times a second (a proxy in a crash loop; without
// the pause the loop would take the cores the daemon and the fleet
// share with it here).
func reconnectLoop(ctx context.Context, addr string, i int, n *misbehaviour) {
	for ctx.Err() == nil {
		c, closeConn, err := soakConn(addr)
		if err != nil {
			return
		}
		sctx, cancel := context.WithCancel(ctx)
		if st, err := c.StreamAggregatedResources(sctx); err == nil {
			if st.Send(&discovery.DiscoveryRequest{Node: soakNode(i), TypeUrl: xdstype.Listener.URL}) == nil {
				_, _ = st.Recv()
			}
			n.reconnects.Add(1)
		}
		cancel()
		closeConn()
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// scrape reads the daemon's Prometheus metrics without labels.
func scrape(httpAddr string) map[string]float64 {
	out := map[string]float64{}
	resp, err := http.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		return out
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		name, v, ok := strings.Cut(sc.Text(), " ")
		if !ok || strings.HasPrefix(name, "#") || strings.Contains(name, "{") {
			continue
		}
		if x, err := strconv.ParseFloat(v, 64); err == nil {
			out[name] = x
		}
	}
	return out
}
