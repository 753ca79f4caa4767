package load

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"
)

// phaseProfile, when BAREMESH_SCALE_PROFILE names a directory, records a
// CPU profile of the daemon (over its /debug/pprof/profile, for secs
// seconds) and of this process (the load client) while one phase of the
// scale scenario runs, and the daemon's heap at the end of it. The
// returned function ends the phase. Without the variable it does nothing.
func phaseProfile(tb testing.TB, d *daemonProc, mode Mode, phase string, secs int) func() {
	dir := os.Getenv("BAREMESH_SCALE_PROFILE")
	if dir == "" || d.http == "" {
		return func() {}
	}
	name := func(what string) string { return filepath.Join(dir, fmt.Sprintf("%s-%s-%s.pprof", mode, phase, what)) }
	done := make(chan struct{})
	go func() {
		defer close(done)
		fetch(tb, fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", d.http, secs), name("daemon-cpu"))
	}()
	if os.Getenv("BAREMESH_SCALE_TRACE") == "1" {
		// An execution trace of the daemon beside the profile: who
		// waited for a CPU, and what ran meanwhile.
		go fetch(tb, fmt.Sprintf("http://%s/debug/pprof/trace?seconds=%d", d.http, secs), name("daemon-trace"))
	}
	cf, err := os.Create(name("client-cpu"))
	if err != nil {
		tb.Fatal(err)
	}
	client := pprof.StartCPUProfile(cf) == nil // fails under -cpuprofile
	return func() {
		if client {
			pprof.StopCPUProfile()
		}
		cf.Close()
		fetch(tb, fmt.Sprintf("http://%s/debug/pprof/heap", d.http), name("daemon-heap"))
		logMemStats(tb, d, phase)
		select {
		case <-done:
		case <-time.After(time.Duration(secs+10) * time.Second):
			tb.Logf("daemon CPU profile of %s did not finish", phase)
		}
	}
}

// logMemStats logs where the daemon's memory is, from its /metrics.
func logMemStats(tb testing.TB, d *daemonProc, phase string) {
	resp, err := http.Get("http://" + d.http + "/metrics")
	if err != nil {
		return
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		for _, m := range []string{"go_memstats_heap_alloc_bytes ", "go_memstats_heap_inuse_bytes ", "go_memstats_heap_idle_bytes ",
			"go_memstats_heap_released_bytes ", "go_memstats_stack_inuse_bytes ", "go_memstats_sys_bytes ", "go_goroutines "} {
			if v, ok := strings.CutPrefix(l, m); ok {
				f, _ := strconv.ParseFloat(v, 64)
				if m != "go_goroutines " {
					f /= 1 << 20
				}
				out = append(out, fmt.Sprintf("%s=%.0f", strings.TrimPrefix(strings.TrimSpace(m), "go_memstats_"), f))
			}
		}
	}
	tb.Logf("%s: daemon memory (MB): %s", phase, strings.Join(out, " "))
}

func fetch(tb testing.TB, url, file string) {
	resp, err := http.Get(url)
	if err != nil {
		tb.Logf("profile %s: %v", url, err)
		return
	}
	defer resp.Body.Close()
	f, err := os.Create(file)
	if err != nil {
		tb.Logf("profile: %v", err)
		return
	}
	defer f.Close()
	_, _ = io.Copy(f, resp.Body)
}

// logStreamEnds logs how many streams the daemon saw end during the run,
// by reason (baremesh_xds_stream_ends_total): a well-behaved fleet that
// stays connected should end none before it stops.
func logStreamEnds(tb testing.TB, d *daemonProc, mode Mode) {
	resp, err := http.Get("http://" + d.http + "/metrics")
	if err != nil {
		return
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "baremesh_xds_stream_ends_total{") && !strings.HasSuffix(l, " 0") { // every reason is exposed, at 0 until it happens
			out = append(out, strings.TrimPrefix(l, "baremesh_xds_stream_ends_total"))
		}
	}
	if len(out) == 0 {
		out = []string{"none"}
	}
	tb.Logf("%s: streams ended while the fleet ran: %s", mode, strings.Join(out, ", "))
}

// heapSnapshots, when BAREMESH_SCALE_HEAPS names a directory, fetches
// the daemon's live heap (after a collection) every half second for six
// seconds from now: what a connect storm holds on its way, where the
// profile at the end of the phase shows only what is left.
func heapSnapshots(tb testing.TB, d *daemonProc, name string) {
	dir := os.Getenv("BAREMESH_SCALE_HEAPS")
	if dir == "" || d.http == "" {
		return
	}
	go func() {
		for i := range 12 {
			select {
			case <-d.done: // stopped: nothing to fetch, and the test may have ended
				return
			case <-time.After(500 * time.Millisecond): // the snapshots' pace
			}
			fetch(tb, fmt.Sprintf("http://%s/debug/pprof/heap?gc=1", d.http), filepath.Join(dir, fmt.Sprintf("%s-heap-%02d.pprof", name, i)))
		}
	}()
}
