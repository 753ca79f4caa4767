package workloads

import (
	"bytes"
	"encoding/json"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/testkit"
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

// BenchmarkSave5000: the state file with 5,000 registrations. "locked"
// is the part made under the controller's lock (connects and table
// events wait meanwhile): the content, compact JSON; "locked-before" is
// what the lock held before, the content indented (MarshalIndent is
// Marshal then Indent) and the write; "write" is the write, now after the
// lock is released. Compare within one run: the machine is shared.
func BenchmarkSave5000(b *testing.B) {
	const n = 5000
	f := newFixture(b, time.Minute, false)
	f.files.Update([]config.Config{group("ns", "reviews", "rev", true)}, nil)
	for j := 0; j < n; j++ {
		if err := f.c.Connect(proxy("ns", "reviews", fmt.Sprintf("10.%d.%d.%d", j>>16, (j>>8)&255, j&255), "rev")); err != nil {
			b.Fatal(err)
		}
	}
	testkit.Eventually(b, "every registration recorded", func() bool { f.c.mu.Lock(); defer f.c.mu.Unlock(); return len(f.c.records) >= n })
	marshal := func(b *testing.B) []byte {
		f.c.mu.Lock()
		defer f.c.mu.Unlock()
		data, err := f.c.marshalLocked()
		if err != nil {
			b.Fatal(err)
		}
		return data
	}
	b.Run("locked", func(b *testing.B) {
		var data []byte
		for i := 0; i < b.N; i++ {
			data = marshal(b)
		}
		b.ReportMetric(float64(len(data))/(1<<20), "MB/file")
	})
	b.Run("locked-before", func(b *testing.B) {
		var out bytes.Buffer
		for i := 0; i < b.N; i++ {
			out.Reset()
			if err := json.Indent(&out, marshal(b), "", "  "); err != nil {
				b.Fatal(err)
			}
			if err := writeState(f.state, out.Bytes()); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(out.Len())/(1<<20), "MB/file")
	})
	b.Run("write", func(b *testing.B) {
		data := marshal(b)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if err := writeState(f.state, data); err != nil {
				b.Fatal(err)
			}
		}
	})
}
