package load

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/baremesh/baremesh/core/testkit"
	"github.com/baremesh/baremesh/internal/daemon"
	"github.com/baremesh/baremesh/internal/daemonconfig"
	"github.com/baremesh/baremesh/xdsserver/xdstype"
)

// bigEntry is a STATIC ServiceEntry with n endpoints; gen makes each
// rewrite differ in one endpoint.
func bigEntry(n, gen int) string {
	var b strings.Builder
	b.WriteString(`apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: big, namespace: default}
spec:
  hosts: [big.load.mesh]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints:
`)
	fmt.Fprintf(&b, "  - {address: 10.200.255.%d}\n", gen%250)
	for i := 1; i < n; i++ {
		fmt.Fprintf(&b, "  - {address: 10.%d.%d.%d}\n", 1+i>>16, (i>>8)&255, i&255)
	}
	return b.String()
}

// slowEnv is a daemon in this process with a big ServiceEntry, and its
// send timeout and stream caps as configure sets them.
type slowEnv struct {
	d   *daemon.Daemon
	dir string
	n   int
}

func startSlowEnv(t *testing.T, endpoints int, configure func(*daemonconfig.Config)) *slowEnv {
	t.Helper()
	dir := t.TempDir()
	for i := range 20 {
		writeFile(t, dir, svcName(i)+".yaml", serviceEntry(svcName(i), svcAddrs(i)...))
	}
	writeFile(t, dir, "big.yaml", bigEntry(endpoints, 0))
	cfg := daemonconfig.Defaults()
	cfg.ConfigDirs = []string{dir}
	cfg.XDSAddr, cfg.HTTPAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.MeshConfig = filepath.Join(dir, "no-meshconfig.yaml")
	cfg.Debounce = daemonconfig.Duration{Duration: 10 * time.Millisecond}
	if configure != nil {
		configure(&cfg)
	}
	d, err := daemon.New(cfg, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = d.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-d.Pipeline().Ready():
	case <-time.After(60 * time.Second):
		t.Fatal("daemon not ready")
	}
	return &slowEnv{d: d, dir: dir, n: endpoints}
}

// slowStreams opens n ADS streams on one connection, each subscribing to
// every endpoint (wildcard EDS), and never reads them: a real gRPC peer
// that stops reading, so HTTP/2 flow control stalls the server's sends.
func slowStreams(t *testing.T, ctx context.Context, addr string, n int) *grpc.ClientConn {
	t.Helper()
	// A fixed 64 KB window (which turns off gRPC's BDP window growth): the
	// stream stalls once 64 KB are unread, as a proxy that stops reading.
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	client := discovery.NewAggregatedDiscoveryServiceClient(cc)
	for i := range n {
		st, err := client.StreamAggregatedResources(ctx)
		if err != nil {
			t.Fatal(err)
		}
		node := &corev3.Node{Id: fmt.Sprintf("sidecar~10.99.%d.%d~slow-%d.default~default.svc.cluster.local", i>>8, i&255, i)}
		if err := st.Send(&discovery.DiscoveryRequest{Node: node, TypeUrl: xdstype.Endpoint.URL}); err != nil {
			t.Fatal(err)
		}
	}
	return cc
}

// newProxyTime is how long a new proxy (the load client: CDS, EDS, LDS,
// RDS) takes to be configured.
func newProxyTime(t *testing.T, addr string, limit time.Duration) (time.Duration, error) {
	// The best of three: one new proxy's wait is a few tens of
	// milliseconds, which a busy machine's scheduling can double.
	best := limit
	for range 3 {
		d, err := oneNewProxy(addr, limit)
		if err != nil {
			return d, err
		}
		best = min(best, d)
	}
	return best, nil
}

func oneNewProxy(addr string, limit time.Duration) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	start := time.Now()
	f, err := Start(ctx, Options{Addr: addr, Proxies: 1, Mode: SotW, Namespace: "default"})
	if err != nil {
		return 0, err
	}
	defer f.Stop()
	if _, err := f.WaitConfigured(ctx); err != nil {
		return time.Since(start), err
	}
	return time.Since(start), nil
}

func heapMB() float64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return float64(m.HeapInuse) / (1 << 20)
}

// stalledStreamBound is what one stream that never reads may hold of its
// own on the server (README, "Full push, slow readers"; measured about
// 0.1 MB at 50,000 endpoints).
const stalledStreamBound = 512 << 10

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func rounded(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(10 * time.Millisecond)
	}
	return out
}

// TestSlowReadersDoNotStallOthers (issue #11, item 4): 100 streams on one
// connection subscribe to every endpoint of a big ServiceEntry and never
// read. Pushes go on; a new proxy is configured about as fast as without
// them, the heap does not grow with every push, and closing the slow
// streams ends them at once. Before the fix the slow streams held every
// send slot: the new proxy got nothing. Its later flakes on a busy machine
// (pushes past their waits, issue #30) had one cause: each slow stream
// asks EDS for everything, and a wildcard EDS subscription was generated
// per stream (100 generations of the big CLA per push, all in the
// generation slots the well-behaved proxy waits for); it is now built
// once per key and endpoint generation (generation.buildWildcard). The heap
// beside the stalled streams is bounded per stream (stalledStreamBound):
// each stream's pending push copied the push's 50,000 changed addresses
// (3.5 MB a stream, and most of the daemon's CPU) until ads kept the
// shared request instead (issue #30). The first push beside them was
// 1.3-2.6× slower than the pushes without them, about a second more:
// it is their first big response, whose sends took the 64 send slots
// and kept them for SlowSend (1 s) while the well-behaved proxy's send
// waited for one; a stalled send now gives its slot up after a lease
// (a tenth of SlowSend) when another send waits (ads slotLease).
func TestSlowReadersDoNotStallOthers(t *testing.T) {
	// The cache assertion (on in make test and make flake) regenerates
	// on every cache hit: each of the 100 wildcard streams would generate
	// the big CLA again on every push, the cost the shared cache exists
	// to avoid; under -race with a CPU hog the first push beside them
	// took more than 150 s (5 s without them). What it checks is covered
	// by build's and ads' cache tests.
	t.Setenv("BAREMESH_CACHE_ASSERT", "0")
	endpoints := envInt("BAREMESH_SLOW_ENDPOINTS", 50_000)
	if raceEnabled {
		endpoints = min(endpoints, 10_000) // the race detector makes generation ~10× slower
	}
	e := startSlowEnv(t, endpoints, nil)
	addr := e.d.XDSAddr()

	base, err := newProxyTime(t, addr, 30*time.Second)
	if err != nil {
		t.Fatalf("new proxy without slow readers: %v", err)
	}
	// A well-behaved proxy that stays connected must see every push.
	// Under the race detector generation is ~10× slower and a loaded
	// machine (a full make test) stretches the first pushes past 30 s
	// (seen at this test's own base commit too): give each push longer
	// there; a stall (slow streams holding the send slots) never arrives.
	pushWait, total := 30*time.Second, 4*time.Minute
	if raceEnabled {
		pushWait, total = 150*time.Second, 15*time.Minute
	}
	wctx, wcancel := context.WithTimeout(context.Background(), total)
	defer wcancel()
	watcher, err := Start(wctx, Options{Addr: addr, Proxies: 1, Mode: SotW, Namespace: "default"})
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Stop()
	if _, err := watcher.WaitConfigured(wctx); err != nil {
		t.Fatal(err)
	}
	// Pushes without slow readers first: the baseline the pushes beside
	// them are compared with (logged, not asserted: on a busy machine
	// two runs of the same pushes differ by more than the target).
	push := func(gen int) time.Duration {
		w := watcher.Expect(HasEndpoint("outbound|80||big.load.mesh", fmt.Sprintf("10.200.255.%d", gen)))
		start := time.Now()
		writeFile(t, e.dir, "big.yaml", bigEntry(endpoints, gen))
		pctx, pcancel := context.WithTimeout(wctx, pushWait)
		err := w.Wait(pctx)
		pcancel()
		if err != nil {
			t.Fatalf("push %d did not reach a well-behaved proxy: %v", gen, err)
		}
		t.Logf("push %d reached the well-behaved proxy in %v", gen, time.Since(start).Round(time.Millisecond))
		return time.Since(start)
	}
	var without, beside []time.Duration
	for gen := 1; gen <= 4; gen++ {
		without = append(without, push(gen))
	}
	heapBase := heapMB()
	streams := 100
	if v, err := strconv.Atoi(os.Getenv("BAREMESH_SLOW_STREAMS")); err == nil {
		streams = v // 0: no slow readers
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cc := slowStreams(t, ctx, addr, streams)
	defer cc.Close()
	testkit.EventuallyWithin(t, 20*time.Second, "the slow streams connect", func() bool { return e.d.XDS().Connected() == streams+1 })

	// A stalled stream holds at most two responses: the one gRPC queued
	// past the window and the next, waiting for it. After two pushes the
	// heap must stay flat however many follow.
	var heap0 float64
	for gen := 5; gen <= 14; gen++ {
		if gen == 7 {
			heap0 = heapMB()
		}
		beside = append(beside, push(gen))
	}
	t.Logf("pushes to the well-behaved proxy: median %v without slow readers %v, %v beside %d of them %v (%.2f×)",
		median(without).Round(time.Millisecond), rounded(without), median(beside).Round(time.Millisecond), streams, rounded(beside),
		median(beside).Seconds()/median(without).Seconds())
	slow, err := newProxyTime(t, addr, 30*time.Second)
	if err != nil {
		t.Fatalf("a new proxy beside 100 slow readers was not configured within 30 s (%v without them): %v", base.Round(time.Millisecond), err)
	}
	heap1 := heapMB()
	if f := os.Getenv("BAREMESH_SLOW_HEAPPROFILE"); f != "" {
		out, err := os.Create(f)
		if err != nil {
			t.Fatal(err)
		}
		_ = pprof.WriteHeapProfile(out)
		out.Close()
	}
	t.Logf("%d endpoints: new proxy configured in %v without slow readers, %v beside %d of them (%.2f×); heap %.0f MB after 2 pushes → %.0f MB after 10",
		endpoints, base.Round(time.Millisecond), slow.Round(time.Millisecond), streams, slow.Seconds()/base.Seconds(), heap0, heap1)
	if limit := max(10*base, 5*time.Second); slow > limit {
		t.Errorf("new proxy beside slow readers took %v, more than %v (%v without them)", slow, limit, base)
	}
	if heap1 > heap0*1.25+20 {
		t.Errorf("heap grew from %.0f MB to %.0f MB over 8 pushes with %d stalled streams", heap0, heap1, streams)
	}
	// What a stalled stream may hold of its own (flow.go): its stream's
	// buffers, its subscription and its pending push's changed keys; the
	// responses it waits on are shared. Beside that, two generations of
	// the big CLA shared by all (about 3 MB each at 50,000 endpoints).
	// Before a pending push stopped copying the request's addresses, each
	// stalled stream held 3.5 MB (heap 474 MB against 122 MB).
	perStream := float64(stalledStreamBound) / (1 << 20)
	t.Logf("heap %.0f MB before the slow streams, %.0f MB beside them: %.2f MB per stalled stream (bound %.2f MB)",
		heapBase, heap1, (heap1-heapBase)/float64(max(streams, 1)), perStream)
	if limit := heapBase + float64(streams)*perStream + 2*float64(endpoints)*64/(1<<20) + 20; heap1 > limit {
		t.Errorf("heap %.0f MB beside %d stalled streams, %.0f MB before them: more than the bound (%.0f MB)", heap1, streams, heapBase, limit)
	}

	start := time.Now()
	cancel()
	testkit.EventuallyWithin(t, 10*time.Second, "the slow streams end once closed", func() bool { return e.d.XDS().Connected() == 1 })
	t.Logf("closing %d slow streams took %v", streams, time.Since(start).Round(time.Millisecond))
}
