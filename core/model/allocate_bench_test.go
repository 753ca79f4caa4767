package model_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/baremesh/baremesh/core/model"
)

func hostKeys(n int) []model.ServiceKey {
	keys := make([]model.ServiceKey, n)
	for i := range keys {
		keys[i] = model.ServiceKey{Hostname: fmt.Sprintf("h%d.ns.mesh", i), Namespace: "ns"}
	}
	return keys
}

// BenchmarkAllocate allocates addresses for n address-less hosts into an
// empty allocator, past the 65,024 addresses of 240.240.0.0/16 for the
// largest sizes; it reports the cost per host.
func BenchmarkAllocate(b *testing.B) {
	for _, n := range []int{10_000, 65_000, 1_000_000} {
		b.Run(fmt.Sprintf("hosts=%d", n), func(b *testing.B) {
			keys := hostKeys(n)
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				a := model.NewAllocator()
				for _, k := range keys {
					a.Allocate(k)
				}
			}
			el := time.Since(start)
			b.ReportMetric(float64(el.Nanoseconds())/float64(b.N*n), "ns/host")
			b.ReportMetric(el.Seconds()/float64(b.N), "s/op-total")
		})
	}
}
