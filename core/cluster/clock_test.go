package cluster

import (
	"fmt"
	"testing"
	"time"

	"github.com/baremesh/baremesh/core/testkit"
)

// TestClockJumpedReplica (issue #32: "jump a replica's clock if the code
// depends on wall time"). A record carries wall times of the replica that
// wrote it (Stamp, DisconnectedAt). Replica b's clock is an hour off
// (jumped back, or forward); a proxy leaves b, b marks its entry
// disconnected by its clock and dies; a, the survivor, removes the entry
// whose proxy never came back. It must do so a grace period after it
// learnt of the disconnect, by its own (monotonic) clock: before, a
// measured the grace period from b's DisconnectedAt, so with b an hour
// behind a removed the entry at once (a proxy reconnecting within the
// grace period lost it), and with b an hour ahead kept it an hour.
//
// The skew is a per-replica clock in the test (Options.Now): Linux has no
// per-process wall clock to jump (a time namespace offsets only the
// monotonic and boot clocks), and jumping the host's would jump every
// process on it. A jump on the replica that wrote the time and one
// between two replicas' clocks are the same case for the reader.
func TestClockJumpedReplica(t *testing.T) {
	const g = 3 * time.Second // long enough that b is dead before its own grace ends
	for _, skew := range []time.Duration{-time.Hour, time.Hour} {
		t.Run(fmt.Sprintf("b %v", skew), func(t *testing.T) {
			n := newNetwork(t, g)
			n.skew = map[string]time.Duration{"b": skew}
			a := n.start("a")
			b := n.start("b", "a")
			n.waitMembers(2, "a", "b")
			// Claims order by the claiming replica's wall clock raised
			// above every claim it has seen: a proxy moving between the
			// two moves its entry whichever clock is ahead.
			const m = "ns/vm-10.0.0.8"
			a.Claim(m, data("a"))
			owned(t, n, m, "a", true, "a", "b")
			a.Release(m)
			b.Claim(m, data("b"))
			owned(t, n, m, "b", true, "a", "b")
			b.Release(m)
			a.Claim(m, data("a"))
			owned(t, n, m, "a", true, "a", "b")

			const k = "ns/vm-10.0.0.9"
			b.Claim(k, data("1"))
			owned(t, n, k, "b", true, "a", "b")
			released := time.Now()
			b.Release(k)
			owned(t, n, k, "b", false, "a")
			_ = b.Shutdown(false) // dies before its own grace period ends
			testkit.EventuallyWithin(t, time.Minute, "a to remove b's disconnected entry", func() bool { _, ok := a.Get(k); return !ok })
			if since := time.Since(released); since < g {
				t.Errorf("a removed the entry %v after the disconnect, want at least the grace period (%v)", since.Round(time.Millisecond), g)
			}
		})
	}
}
