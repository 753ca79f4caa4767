package daemon

import (
	"context"
	"runtime"
	"runtime/debug"
	"time"
)

// Idle trim (issue #30). Go gives freed heap back to the operating system
// slowly, keeping up to the heap goal (twice the live heap) mapped: after
// a full push to 2,000 proxies the daemon sat at 176 MB RSS for minutes
// with 125 MB of it anonymous, though its live heap was about half that.
// Once the daemon has been quiet for a second after pushing, taking
// connections or sending, it collects and returns the free memory, once
// (trimHeap: two collections, tens of milliseconds of CPU each at that
// heap), so that the next push starts from the live heap and not from
// the goal a collection in the middle of the last one set (a push to
// 2,000 SotW proxies read 80 KB ACKs from each into gRPC's buffers: the
// heap goal was 123-134 MB at the next push, against 45 MB live). The
// trims take at most idleTrimShare of the time: after a trim of d, the
// next waits d/idleTrimShare. A daemon whose config changes every
// second never trims. It collects twice because buffers given back to
// a sync.Pool (gRPC's read buffers, 15 MB of the heap after a
// 2,000-proxy push; our own encoders') survive one collection in the
// pool's victim cache and are freed by the second.

// idleTrimPeriod is how long the daemon must be quiet before a trim.
const idleTrimPeriod = time.Second

// idleTrimShare bounds the share of the time that trims take.
const idleTrimShare = 0.01

// idleTrim trims once after activity (a change of activity()) followed
// by a whole period without one, at most share of the time.
type idleTrim struct {
	every    time.Duration
	share    float64 // 0: no bound
	activity func() uint64
	trim     func()
}

func (t idleTrim) run(ctx context.Context) {
	tick := time.NewTicker(t.every)
	defer tick.Stop()
	last, dirty := t.activity(), false
	var notBefore time.Time // the last trim's share
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if now := t.activity(); now != last {
			last, dirty = now, true
			continue
		}
		if dirty && !time.Now().Before(notBefore) {
			start := time.Now()
			t.trim()
			dirty = false
			if t.share > 0 {
				notBefore = time.Now().Add(time.Duration(float64(time.Since(start)) / t.share))
			}
		}
	}
}

// startIdleTrim runs the trim on the daemon's pushes (counted by a
// pipeline listener, added in New), the streams it has opened and the
// responses it has sent (a connect storm pushes nothing, but sends).
func (d *Daemon) startIdleTrim(ctx context.Context, goRun func(func())) {
	t := idleTrim{every: idleTrimPeriod, share: idleTrimShare, trim: trimHeap,
		activity: func() uint64 { return d.pushes.Load() + d.xds.Opened() + d.xds.Sends() }}
	goRun(func() { t.run(ctx) })
}

// trimHeap empties the sync.Pools (one collection moves their contents
// to the victim cache, the next frees it) and returns the free memory
// to the operating system.
func trimHeap() {
	runtime.GC()
	debug.FreeOSMemory()
}
