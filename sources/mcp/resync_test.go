package mcp_test

import (
	"fmt"
	"sort"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/baremesh/baremesh/core/store"
)

// TestUpstreamRestartRaisesNothing restarts the upstream with its content
// unchanged: the store must see no event and the sink no update (so the
// push pipeline, which follows store events, pushes nothing). "NewVersions"
// restarts it with every resource at a new version, as a restarted server
// that numbers versions afresh would.
func TestUpstreamRestartRaisesNothing(t *testing.T) {
	for _, newVersions := range []bool{false, true} {
		protocols(t, func(t *testing.T, form wireForm, delta bool) {
			t.Logf("new versions after restart: %v", newVersions)
			srv, w, u := started(t, form, delta, testOptions())
			srv.put(seURL, ses(1000, 80))
			poll(t, "1001 add events", 10*time.Second, func() bool { ev, _ := w.counts(); return ev == 1001 })
			ev0, up0 := w.counts()
			r0 := u.Status().Responses
			srv.restart(t)
			if newVersions {
				all := ses(1000, 80)
				all["test/a"] = se("a.example.com", 80)
				srv.put(seURL, all)
			}
			poll(t, "a reconnect", 10*time.Second, func() bool { return u.Status().Reconnects > 0 && u.Status().Connected })
			if !delta || newVersions {
				poll(t, "the resync response", 10*time.Second, func() bool { return u.Status().Responses > r0 })
			}
			// A later real change proves the stream is live and that
			// nothing before it was delivered.
			srv.put(seURL, map[string]proto.Message{"test/a": se("a.example.com", 81)})
			w.waitPort(t, "a", 81)
			// The store holds the change before the watcher has counted
			// its event (delivered after the write): wait for the count,
			// then check that nothing else came first.
			poll(t, "the real change's event and sink update", 10*time.Second, func() bool { ev, up := w.counts(); return ev > ev0 && up > up0 })
			ev, up := w.counts()
			t.Logf("upstream restart: %d store events, %d sink updates (then 1 real change: the last of them)", ev-ev0-1, up-up0-1)
			if ev-ev0 != 1 || up-up0 != 1 {
				t.Fatalf("restart with unchanged content raised %d events and %d sink updates; want 0 and 0", ev-ev0-1, up-up0-1)
			}
		})
	}
}

// TestChangeLatency measures a change at the upstream → the store event,
// over 100 changes.
func TestChangeLatency(t *testing.T) {
	protocols(t, func(t *testing.T, form wireForm, delta bool) {
		srv, w, _ := started(t, form, delta, testOptions())
		var lat []time.Duration
		for i := 1; i <= 100; i++ {
			w.mu.Lock()
			n := len(w.events)
			w.mu.Unlock()
			start := time.Now()
			srv.put(seURL, map[string]proto.Message{"test/a": se("a.example.com", uint32(1000+i))})
			var at time.Time
			poll(t, fmt.Sprintf("change %d", i), 10*time.Second, func() bool {
				w.mu.Lock()
				defer w.mu.Unlock()
				for j := n; j < len(w.events); j++ {
					if w.events[j].Type == store.EventUpdate {
						at = w.at[j]
						return true
					}
				}
				return false
			})
			lat = append(lat, at.Sub(start))
		}
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		t.Logf("upstream change → store event over 100 changes: p50 %v, p99 %v, max %v", lat[49], lat[98], lat[99])
	})
}
