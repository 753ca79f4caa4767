package daemon

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baremesh/baremesh/core/testkit"
)

// The idle trim runs once after activity and a whole quiet period, never
// while the activity goes on, and not again until there is new activity.
func TestIdleTrimOnceAfterActivity(t *testing.T) {
	var activity, trims, ticks atomic.Uint64
	var active atomic.Bool // every tick sees new activity
	active.Store(true)
	tr := idleTrim{every: 5 * time.Millisecond, trim: func() { trims.Add(1) },
		activity: func() uint64 {
			ticks.Add(1)
			if active.Load() {
				return activity.Add(1)
			}
			return activity.Load()
		}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go tr.run(ctx)

	testkit.EventuallyWithin(t, 10*time.Second, "20 active ticks", func() bool { return ticks.Load() > 20 })
	if n := trims.Load(); n != 0 {
		t.Fatalf("%d trims while active", n)
	}
	active.Store(false)
	// Quiet: one trim, and no other however long it stays quiet.
	testkit.EventuallyWithin(t, 10*time.Second, "the trim after activity", func() bool { return trims.Load() == 1 })
	n := ticks.Load()
	testkit.EventuallyWithin(t, 10*time.Second, "ten quiet ticks", func() bool { return ticks.Load() > n+10 })
	if n := trims.Load(); n != 1 {
		t.Fatalf("%d trims after one burst of activity, want 1", n)
	}
	// New activity, then quiet: one more.
	activity.Add(1)
	testkit.EventuallyWithin(t, 10*time.Second, "the trim after new activity", func() bool { return trims.Load() == 2 })
}

// trimHeap frees what sync.Pools hold (gRPC's read buffers): after it,
// a pool that held buffers is empty (one collection alone keeps them in
// the pool's victim cache, where Get finds them).
func TestTrimHeapEmptiesPools(t *testing.T) {
	var pool sync.Pool
	for range 8 {
		b := make([]byte, 1<<20)
		pool.Put(&b)
	}
	trimHeap()
	if b := pool.Get(); b != nil {
		t.Fatalf("the pool still holds a buffer of %d bytes after the trim", len(*b.(*[]byte)))
	}
}
