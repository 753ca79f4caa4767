package model_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/core/store"
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

// BenchmarkRegistryApplyAddressless applies one ServiceEntry with n
// address-less hosts to an empty registry and lists its services: the
// allocator's cost in the path config takes.
func BenchmarkRegistryApplyAddressless(b *testing.B) {
	for _, n := range []int{70_000, 1_000_000} {
		b.Run(fmt.Sprintf("hosts=%d", n), func(b *testing.B) {
			c := manyHostsEntry(b, n)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				reg := model.NewRegistry(model.NewAllocator())
				reg.Apply(model.Update{Events: []store.Event{{Type: store.EventAdd, New: &c}}})
				if len(reg.Services()) != n || len(reg.Problems()) != 1 {
					b.Fatal("wrong services or problems")
				}
			}
		})
	}
}
