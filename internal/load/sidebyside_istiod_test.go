package load

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/baremesh/baremesh/internal/istiodtest"
)

// BenchmarkIstiodSideBySide is issue #30's side-by-side run: the mesh of
// BenchmarkScale (1,000 ServiceEntries, a STRICT PeerAuthentication, an
// AuthorizationPolicy) and BAREMESH_ISTIOD_PROXIES (default 1,000)
// simulated istio-proxy sidecars, against baremeshd (its own process,
// the mesh as files) and then against Istio's istiod (pilot-discovery
// over a test kube-apiserver, the mesh as custom resources, the proxies
// on its plaintext xDS port), one after the other in this process so the
// figures share the machine's state. Each side is measured alike: the
// server's CPU (its process's /proc/PID/stat) and RSS, the time until
// every proxy is configured, an endpoint edit, and a new ServiceEntry
// (write → the first proxy has the cluster, write → every proxy
// converged, CPU per proxy), and the bytes a proxy received, per xDS
// type. It logs one table (figure, istiod, baremeshd, ratio) per mode and
// where one proxy's configuration differs in size between the two, per
// type (resources only one side sends, then the fields that differ most).
// BAREMESH_ISTIOD_MODES (default "sotw,delta") picks the modes; Delta is
// measured on istiod only if it answers it. BAREMESH_ISTIOD_ENV adds
// space-separated NAME=VALUE settings to istiod's environment (e.g.
// PILOT_MAX_REQUESTS_PER_SECOND=1000: istiod admits 25 new streams a
// second on 2 cores and refuses the rest, which then reconnect with
// backoff, so its configure-all time is mostly that limit). Skipped when
// istio-bins or kube-assets are missing.
func BenchmarkIstiodSideBySide(b *testing.B) {
	if _, _, _, missing := istiodtest.Binaries(); missing != "" {
		b.Skipf("skipping: istiod needs %s", missing)
	}
	for _, m := range strings.Split(envStr("BAREMESH_ISTIOD_MODES", "sotw,delta"), ",") {
		mode := Mode(strings.TrimSpace(m))
		b.Run(string(mode), func(b *testing.B) {
			// One run per mode, as BenchmarkScale: later calls (b.N=3)
			// report the first run's figures.
			res, err := sideBySideOnce(b, mode)
			if err != nil {
				b.Fatal(err)
			}
			for _, m := range res {
				b.ReportMetric(m.v, m.unit)
			}
		})
	}
}

func envStr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

var (
	sideMu      sync.Mutex
	sideResults = map[Mode][]metric{}
)

func sideBySideOnce(b *testing.B, mode Mode) ([]metric, error) {
	sideMu.Lock()
	defer sideMu.Unlock()
	if r, ok := sideResults[mode]; ok {
		return r, nil
	}
	proxies, services := envInt("BAREMESH_ISTIOD_PROXIES", 1000), envInt("BAREMESH_SCALE_SERVICES", 1000)
	raiseNoFile(b)
	ours, err := measureSide(b, "baremeshd", mode, proxies, services, startOurs)
	if err != nil {
		return nil, fmt.Errorf("baremeshd: %w", err)
	}
	theirs, err := measureSide(b, "istiod", mode, proxies, services, startTheirs)
	if err != nil {
		return nil, fmt.Errorf("istiod: %w", err)
	}
	// Printed, not logged: the testing package keeps only ten lines of a
	// benchmark's log.
	fmt.Printf("\n%s: istiod beside baremeshd, %s, %d proxies, %d services (load average %s):\n%s\n",
		b.Name(), mode, proxies, services, loadAvg(), compareTable(theirs, ours))
	fmt.Printf("%s: one proxy's configuration, istiod against baremeshd:\n%s\n", b.Name(), compareInventories(theirs.inv, ours.inv))
	var out []metric
	if theirs != nil && theirs.skipped == "" {
		ratio := func(o, t float64) float64 {
			if t == 0 {
				return 0
			}
			return o / t
		}
		out = append(out,
			metric{theirs.newsvcCPUms, "istiod-newsvc-cpu-ms/proxy"}, metric{ours.newsvcCPUms, "newsvc-cpu-ms/proxy"},
			metric{ratio(ours.newsvcCPUms, theirs.newsvcCPUms), "newsvc-cpu-ratio"},
			metric{ratio(float64(ours.initialBytes()), float64(theirs.initialBytes())), "bytes/proxy-ratio"},
			metric{ratio(ours.editCPU, theirs.editCPU), "edit-cpu-ratio"},
			metric{ratio(ours.rssSteady, theirs.rssSteady), "rss-ratio"})
	}
	sideResults[mode] = out
	return out, nil
}

// side is one control plane under test: its xDS address, its process
// (for CPU and memory), and how a ServiceEntry reaches it.
type side struct {
	xds  string
	proc *daemonProc // only pid is used for an istiod
	// put writes (creates or replaces) service name's ServiceEntry.
	put func(ctx context.Context, name string, addrs []string) error
}

type starter func(b *testing.B, ctx context.Context, services int) (*side, func(), error)

// startOurs is baremeshd as BenchmarkScale runs it.
func startOurs(b *testing.B, _ context.Context, services int) (*side, func(), error) {
	d := startProcess(b, services)
	return &side{xds: d.xds, proc: d, put: func(_ context.Context, name string, addrs []string) error {
		writeFile(b, d.conf, name+".yaml", serviceEntry(name, addrs...))
		return nil
	}}, d.stop, nil
}

// startTheirs is istiod with the same mesh as custom resources; it
// returns once a probe proxy holds every service.
func startTheirs(b *testing.B, ctx context.Context, services int) (*side, func(), error) {
	var env []string
	if e := os.Getenv("BAREMESH_ISTIOD_ENV"); e != "" {
		env = strings.Fields(e)
	}
	i := istiodtest.Start(b, istiodtest.Options{LogCopy: os.Getenv("BAREMESH_ISTIOD_LOG"), Env: env})
	if err := i.Namespace(ctx, "default"); err != nil {
		return nil, nil, err
	}
	s := &side{xds: i.XDSAddr, proc: &daemonProc{pid: i.PID}, put: func(ctx context.Context, name string, addrs []string) error {
		return applyYAML(ctx, i, serviceEntry(name, addrs...))
	}}
	for _, doc := range strings.Split(meshPolicy, "\n---\n") {
		if err := applyYAML(ctx, i, doc); err != nil {
			return nil, nil, err
		}
	}
	work, errs := make(chan int), make(chan error, services)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range work {
				if err := s.put(ctx, svcName(k), svcAddrs(k)); err != nil {
					errs <- err
				}
			}
		}()
	}
	for k := range services {
		work <- k
	}
	close(work)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, nil, err
	}
	// One proxy that holds all services' clusters says istiod's push
	// context has the whole mesh.
	probe, err := Start(ctx, Options{Addr: i.XDSAddr, Proxies: 1, Mode: SotW})
	if err != nil {
		return nil, nil, err
	}
	defer probe.Stop()
	w := probe.Expect(func(v View) bool {
		for k := range services {
			if v.Cluster(cluster80(svcName(k))) == nil {
				return false
			}
		}
		return true
	})
	if err := w.Wait(ctx); err != nil {
		return nil, nil, fmt.Errorf("probe proxy never held all %d services: %w; istiod's log:\n%s", services, err, i.LogTail(3000))
	}
	return s, i.Stop, nil
}

func applyYAML(ctx context.Context, i *istiodtest.Istiod, doc string) error {
	var obj map[string]any
	if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
		return fmt.Errorf("parse %q: %w", doc, err)
	}
	_, err := i.Apply(ctx, obj)
	return err
}

// sideFigures are one control plane's figures for one mode.
type sideFigures struct {
	name    string
	skipped string // why the side was not measured
	proxies int

	configured, configuredP50 time.Duration
	connectCPU                float64
	rssIdle, rssSteady        float64
	rssPeak                   float64
	initial                   [numTypes]int64 // bytes per proxy

	editAcked time.Duration
	editCPU   float64

	newsvcFirst, newsvcAll time.Duration
	newsvcCPUms            float64
	newsvc                 [numTypes]int64 // bytes per proxy

	nacks, reconnects int
	inv               [numTypes]inventory // proxy 0's configuration
}

func (s *sideFigures) initialBytes() (n int64) {
	for _, v := range s.initial {
		n += v
	}
	return n
}

func (s *sideFigures) newsvcBytes() (n int64) {
	for _, v := range s.newsvc {
		n += v
	}
	return n
}

// measureSide runs the scale scenario against one control plane.
func measureSide(b *testing.B, name string, mode Mode, proxies, services int, start starter) (*sideFigures, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	fig := &sideFigures{name: name, proxies: proxies}
	b.Logf("%s %s: starting with %d services (%s)", name, mode, services, time.Now().Format(time.TimeOnly))
	s, stop, err := start(b, ctx, services)
	if err != nil {
		return nil, err
	}
	defer stop()
	if err := Probe(ctx, s.xds, mode); err != nil {
		if name == "istiod" && mode == Delta {
			fig.skipped = fmt.Sprintf("istiod does not answer %s: %v", mode, err)
			b.Log(fig.skipped)
			return fig, nil
		}
		return nil, fmt.Errorf("probe %s xDS: %w", mode, err)
	}
	settle(s.proc)
	d := s.proc
	fig.rssIdle = d.status("VmRSS")
	cpu0 := d.cpu()
	f, err := Start(ctx, Options{Addr: s.xds, Proxies: proxies, Mode: mode})
	if err != nil {
		return nil, err
	}
	defer f.Stop()
	stopProgress := progress(b, name+" "+string(mode)+" connect", f)
	lat, err := f.WaitConfigured(ctx)
	stopProgress()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", mode, err)
	}
	sum := lat.Percentiles()
	fig.configured, fig.configuredP50, fig.connectCPU = sum.Max, sum.P50, d.cpu()-cpu0
	tot := f.Totals()
	for _, t := range Types {
		fig.initial[t] = tot.Bytes[t] / int64(proxies)
	}
	fig.inv = takeInventory(f.View(0))
	settle(d)
	fig.rssSteady = d.status("VmRSS")
	b.Logf("%s %s: %d proxies configured %v, server CPU %.1fs, RSS %.0f MB", name, mode, proxies, sum, fig.connectCPU, fig.rssSteady)

	// One endpoint of one service moves.
	i := services / 2
	addrs := svcAddrs(i)
	addrs[0] = "10.250.0.1"
	w := f.Expect(HasEndpoint(cluster80(svcName(i)), "10.250.0.1"))
	cpu1 := d.cpu()
	begin := time.Now()
	if err := s.put(ctx, svcName(i), addrs); err != nil {
		return nil, err
	}
	if err := w.Wait(ctx); err != nil {
		return nil, fmt.Errorf("%s endpoint edit: %w", mode, err)
	}
	fig.editAcked, fig.editCPU = w.Latencies(begin).Percentiles().Max, d.cpu()-cpu1
	settle(d)

	// A new service.
	n := svcName(services)
	first := f.Expect(func(v View) bool { return v.Cluster(cluster80(n)) != nil })
	w = f.Expect(All(
		func(v View) bool { return v.Cluster(cluster80(n)) != nil },
		HasEndpoint(cluster80(n), svcAddrs(services)[0]),
		HasRouteDomain(host(n)),
	))
	cpu2, tot2 := d.cpu(), f.Totals()
	begin = time.Now()
	if err := s.put(ctx, n, svcAddrs(services)); err != nil {
		return nil, err
	}
	stopProgress = progress(b, name+" "+string(mode)+" new service", f)
	err = w.Wait(ctx)
	stopProgress()
	if err != nil {
		return nil, fmt.Errorf("%s new service: %w", mode, err)
	}
	fig.newsvcAll = w.Latencies(begin).Percentiles().Max
	fig.newsvcFirst = minLatency(first.Latencies(begin))
	fig.newsvcCPUms = 1000 * (d.cpu() - cpu2) / float64(proxies)
	tot3 := f.Totals()
	for _, t := range Types {
		fig.newsvc[t] = (tot3.Bytes[t] - tot2.Bytes[t]) / int64(proxies)
	}
	fig.nacks, fig.reconnects = tot3.Nacks, tot3.Reconnects
	fig.rssPeak = d.status("VmHWM")
	b.Logf("%s %s: new service: first proxy %v, all %v, %.2f ms CPU per proxy; edit %v, %.2fs CPU; RSS peak %.0f MB",
		name, mode, fig.newsvcFirst, fig.newsvcAll, fig.newsvcCPUms, fig.editAcked, fig.editCPU, fig.rssPeak)
	return fig, nil
}

// loadAvg is the machine's load average (1, 5, 15 minutes).
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

func minLatency(l Latencies) time.Duration {
	if len(l) == 0 {
		return 0
	}
	m := l[0]
	for _, v := range l[1:] {
		m = min(m, v)
	}
	return m
}

// settle waits until the server is idle (under 50 ms of CPU in a
// second), at most 30 s: a full push still running after a change is
// not counted in the next phase.
func settle(d *daemonProc) {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		c := d.cpu()
		time.Sleep(time.Second) // the window CPU is measured over
		if d.cpu()-c < 0.05 {
			return
		}
	}
}

// progress logs, every 30 s until the returned function is called, how
// many proxies are configured and the bytes received so far, so a long
// run shows it is moving.
func progress(b *testing.B, what string, f *Fleet) func() {
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(30 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				var configured int
				for _, r := range f.Records() {
					if !r.Configured.IsZero() {
						configured++
					}
				}
				tot := f.Totals()
				var sum int64
				for _, v := range tot.Bytes {
					sum += v
				}
				fmt.Fprintf(os.Stderr, "%s %s: %d/%d proxies configured, %.0f MB received\n",
					time.Now().Format(time.TimeOnly), what, configured, f.Len(), mb(sum))
			}
		}
	}()
	return func() { close(stop); <-done }
}
