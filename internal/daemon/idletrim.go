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
// Once the daemon has been quiet for a whole period after pushing or
// taking connections, it collects and returns the free memory, once
// (trimHeap: two collections, tens of milliseconds of CPU each at that
// heap). A daemon whose config changes every period never trims. It
// collects twice because buffers given back to a sync.Pool (gRPC's read
// buffers, 15 MB of the heap after a 2,000-proxy push; our own
// encoders') survive one collection in the pool's victim cache and are
// freed by the second.

// idleTrimPeriod is how long the daemon must be quiet before a trim.
const idleTrimPeriod = 30 * time.Second

// idleTrim trims once after activity (a change of activity()) followed
// by a whole period without one.
type idleTrim struct {
	every    time.Duration
	activity func() uint64
	trim     func()
}

func (t idleTrim) run(ctx context.Context) {
	tick := time.NewTicker(t.every)
	defer tick.Stop()
	last, dirty := t.activity(), false
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
		if dirty {
			t.trim()
			dirty = false
		}
	}
}

// startIdleTrim runs the trim on the daemon's pushes (counted by a
// pipeline listener, added in New) and the streams it has opened.
func (d *Daemon) startIdleTrim(ctx context.Context, goRun func(func())) {
	t := idleTrim{every: idleTrimPeriod, trim: trimHeap,
		activity: func() uint64 { return d.pushes.Load() + d.xds.Opened() }}
	goRun(func() { t.run(ctx) })
}

// trimHeap empties the sync.Pools (one collection moves their contents
// to the victim cache, the next frees it) and returns the free memory
// to the operating system.
func trimHeap() {
	runtime.GC()
	debug.FreeOSMemory()
}
