package workloads

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/baremesh/baremesh/core/config"
)

// BenchmarkRegistrations registers 5,000 proxies of one group (state
// file on, as in the daemon) and reports the retained heap per
// registration: the controller's entry, the built WorkloadEntry in the
// memory store and the aggregate's copy.
func BenchmarkRegistrations(b *testing.B) {
	const n = 5000
	for i := 0; i < b.N; i++ {
		f := newFixture(b, time.Minute, false)
		f.files.Update([]config.Config{group("ns", "reviews", "rev", true)}, nil)
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		start := time.Now()
		for j := 0; j < n; j++ {
			if err := f.c.Connect(proxy("ns", "reviews", fmt.Sprintf("10.%d.%d.%d", j>>16, (j>>8)&255, j&255), "rev")); err != nil {
				b.Fatal(err)
			}
		}
		el := time.Since(start)
		f.c.Stop() // flushes the state file
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "heapB/registration")
		b.ReportMetric(float64(el.Microseconds())/n, "µs/registration")
		runtime.KeepAlive(f)
	}
}
