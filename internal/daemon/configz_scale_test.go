package daemon

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/baremesh/baremesh/core/testkit"
)

// TestConfigzPageScale measures /debug/configz over many one-resource
// files (issue #30: with 100,000 a page took 25 s), run by hand:
//
//	BAREMESH_CONFIGZ_FILES=100000 go test -run TestConfigzPageScale -v ./internal/daemon
//
// It logs the time and the CPU (user+system, of the whole process: the
// daemon is in it) from start to ready, each page's time and CPU, and
// the process's largest RSS while ?all=1 streams. With
// BAREMESH_CONFIGZ_PROFILE=path it writes a CPU profile of the start,
// with BAREMESH_CONFIGZ_HEAPPROFILE=path a heap profile at ready.
func TestConfigzPageScale(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("BAREMESH_CONFIGZ_FILES"))
	if n == 0 {
		t.Skip("set BAREMESH_CONFIGZ_FILES=N")
	}
	dir := filepath.Join(t.TempDir(), "conf.d")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		body := fmt.Sprintf("apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: s%d, namespace: ns%d}\nspec:\n  hosts: [s%d.ns%d.mesh]\n  ports: [{number: 80, name: http, protocol: HTTP}]\n  resolution: DNS\n",
			i, i%10, i, i%10)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%06d.yaml", i)), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if p := os.Getenv("BAREMESH_CONFIGZ_PROFILE"); p != "" {
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		defer pprof.StopCPUProfile() // also stopped at ready; a second stop does nothing
	}
	start, cpu0 := time.Now(), cpuTime()
	d, _ := startDaemon(t, dir)
	testkit.EventuallyWithin(t, 10*time.Minute, "readyz", func() bool { code, _ := get(t, "http://"+d.HTTPAddr()+"/readyz"); return code == 200 })
	pprof.StopCPUProfile()
	t.Logf("%d files: ready in %v, %v CPU (user+system)", n, time.Since(start).Round(time.Millisecond), (cpuTime() - cpu0).Round(time.Millisecond))
	if p := os.Getenv("BAREMESH_CONFIGZ_HEAPPROFILE"); p != "" {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		t.Logf("heap in use at ready: %d MB", ms.HeapInuse>>20)
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		_ = pprof.WriteHeapProfile(f)
		f.Close()
	}
	for _, q := range []string{"", "?offset=50000", "?kind=ServiceEntry&namespace=ns3", "?source=" + filepath.Join(dir, "f0001")} {
		start, cpu0 := time.Now(), cpuTime()
		code, body := get(t, "http://"+d.HTTPAddr()+"/debug/configz"+q)
		if code != 200 {
			t.Fatalf("configz%s: %d", q, code)
		}
		t.Logf("configz%s: %d bytes in %v, %v CPU", q, len(body), time.Since(start).Round(time.Millisecond), (cpuTime() - cpu0).Round(time.Millisecond))
	}
	// ?all=1, read as it comes (not held by the client, which shares the
	// process), with the RSS sampled while it streams.
	rss0 := rssKB(t)
	var peak atomic.Int64
	peak.Store(rss0)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
				if r := rssKB(t); r > peak.Load() {
					peak.Store(r)
				}
			}
		}
	}()
	start, cpu0 = time.Now(), cpuTime()
	resp, err := http.Get("http://" + d.HTTPAddr() + "/debug/configz?all=1")
	if err != nil {
		t.Fatal(err)
	}
	size, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	close(done)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("configz?all=1: %d %v", resp.StatusCode, err)
	}
	t.Logf("configz?all=1: %d bytes in %v, %v CPU; RSS %d MB before, at most %d MB while it streamed",
		size, time.Since(start).Round(time.Millisecond), (cpuTime() - cpu0).Round(time.Millisecond), rss0>>10, peak.Load()>>10)
}

// cpuTime is the process's user+system CPU so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// rssKB is the process's resident set size now, in KB.
func rssKB(t *testing.T) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb
		}
	}
	return 0
}
