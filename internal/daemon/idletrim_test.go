package daemon

import (
	"context"
	"fmt"
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

// Trims take at most their share of the time: after a trim of 20 ms at
// a share of 0.1, new activity and a quiet tick do not trim again until
// 200 ms after it ended.
func TestIdleTrimShare(t *testing.T) {
	var activity, reads atomic.Uint64
	var mu sync.Mutex
	var starts, ends []time.Time
	tr := idleTrim{every: 2 * time.Millisecond, share: 0.1,
		activity: func() uint64 { reads.Add(1); return activity.Load() },
		trim: func() {
			mu.Lock()
			starts = append(starts, time.Now())
			mu.Unlock()
			time.Sleep(20 * time.Millisecond) // the trim's cost, not a wait for a condition
			mu.Lock()
			ends = append(ends, time.Now())
			mu.Unlock()
		}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go tr.run(ctx)
	trims := func() int { mu.Lock(); defer mu.Unlock(); return len(ends) }
	testkit.EventuallyWithin(t, 10*time.Second, "the first read of the activity", func() bool { return reads.Load() > 0 })
	for want := 1; want <= 3; want++ {
		activity.Add(1)
		testkit.EventuallyWithin(t, 10*time.Second, fmt.Sprintf("trim %d", want), func() bool { return trims() == want })
	}
	mu.Lock()
	defer mu.Unlock()
	for i := 1; i < len(starts); i++ {
		if gap := starts[i].Sub(ends[i-1]); gap < 200*time.Millisecond {
			t.Fatalf("trim %d started %v after trim %d ended, want at least 200ms (20ms at a share of 0.1)", i+1, gap, i)
		}
	}
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
