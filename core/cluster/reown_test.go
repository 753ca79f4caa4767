package cluster

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/baremesh/baremesh/core/testkit"
)

// reownBound is how long after a dead member is declared dead the
// survivors may take to agree on the ownership of its entries (the
// README's replica section states it): the proxies that came back are
// owned, connected, by the survivor they reached, the others are marked
// disconnected, on every survivor.
const reownBound = 2 * time.Second

// TestReownAfterKill: c, holding 150 registrations, is stopped without
// leaving (a kill -9). Its proxies come back to a and b one by one over a
// second and a half, never enough at once for the burst sync, while c is
// still a gossip target (memberlist gossips to a dead member for
// GossipToTheDeadTime, 30 s by default); a tenth never come back. The
// survivors must agree within reownBound of the death, not at the next
// push-pull (30 s here, as by default). Before the fix, the claims and
// orphan marks whose few gossip sends went to c stayed unseen by the
// other survivor until then. REOWN_RUNS repeats it (20 for the issue's
// figure).
func TestReownAfterKill(t *testing.T) {
	runs := 2
	if s := os.Getenv("REOWN_RUNS"); s != "" {
		runs, _ = strconv.Atoi(s)
	}
	var worst time.Duration
	for i := range runs {
		d := reownOnce(t)
		t.Logf("run %d: survivors agreed %v after the later of the last claim and the death", i+1, d.Round(time.Millisecond))
		worst = max(worst, d)
	}
	t.Logf("worst of %d runs: %v (bound %v)", runs, worst.Round(time.Millisecond), reownBound)
}

func reownOnce(t *testing.T) time.Duration {
	t.Helper()
	const grace = 3 * time.Second
	n := newNetwork(t, grace)
	n.tune = func(c *memberlist.Config) {
		// memberlist's defaults (LAN): failure detection in seconds,
		// gossip every 200 ms, push-pull every 30 s.
		d := memberlist.DefaultLANConfig()
		c.ProbeInterval, c.ProbeTimeout, c.SuspicionMult = d.ProbeInterval, d.ProbeTimeout, d.SuspicionMult
		c.GossipInterval, c.PushPullInterval, c.GossipToTheDeadTime = d.GossipInterval, d.PushPullInterval, d.GossipToTheDeadTime
		c.TCPTimeout = d.TCPTimeout
	}
	a := n.start("a")
	b := n.start("b", "a")
	c := n.start("c", "a")
	n.waitMembers(3, all...)
	entries := 40
	if s := os.Getenv("REOWN_ENTRIES"); s != "" {
		entries, _ = strconv.Atoi(s)
	}
	keys := make([]string, entries)
	for i := range keys {
		keys[i] = fmt.Sprintf("vms/web-10.3.0.%d", i)
		c.Claim(keys[i], bigData(keys[i]))
	}
	c.syncSoon() // as a burst would: the set-up is not what is measured
	for _, nd := range []*node{a, b} {
		testkit.Eventually(t, nd.Name()+" holds c's entries", func() bool { return len(nd.Records()) == entries })
	}
	// A survivor writes off a dead member's record only once it has held
	// it a grace period (a partition healing, see reap): these proxies
	// have been connected for longer.
	outlive(t, time.Now(), grace)
	if err := c.Shutdown(false); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()

	back := map[string]string{} // key -> the survivor its proxy reached
	gap, _ := time.ParseDuration(os.Getenv("REOWN_GAP"))
	if gap == 0 {
		gap = 30 * time.Millisecond
	}
	tick := time.NewTicker(gap)
	defer tick.Stop()
	for _, i := range rand.Perm(entries) {
		if i%10 == 0 {
			continue // never comes back
		}
		<-tick.C // proxies reconnect with jitter, not all at once
		nd := []*node{a, b}[rand.IntN(2)]
		nd.Claim(keys[i], bigData(keys[i]))
		back[keys[i]] = nd.Name()
	}
	agreed := func() bool {
		for _, nd := range []*node{a, b} {
			for _, k := range keys {
				r, ok := nd.Get(k)
				if owner, back := back[k]; back && (!ok || r.Owner != owner || !r.Connected()) || !back && r.Connected() {
					return false
				}
			}
		}
		return true
	}
	// The proxies came back at once (their streams ended with c), before
	// the survivors knew c was dead. The bound runs from the later of the
	// last claim and the death being declared. Polled past the bound so a
	// failure says by how much.
	n.waitMembers(2, "a", "b")
	last := time.Now()
	for !agreed() && time.Since(last) < reownBound+time.Second {
		time.Sleep(5 * time.Millisecond) // polling, not synchronisation
	}
	took := time.Since(last)
	t.Logf("agreed %v after the kill", time.Since(killed).Round(time.Millisecond))
	if took > reownBound {
		for _, nd := range []*node{a, b} {
			for _, k := range keys {
				r, ok := nd.Get(k)
				if owner, back := back[k]; back && (!ok || r.Owner != owner || !r.Connected()) || !back && r.Connected() {
					t.Logf("%s: %s %+v %v (came back to %q)", nd.Name(), k, r, ok, owner)
				}
			}
		}
	}
	if !agreed() || took > reownBound {
		t.Errorf("a and b agreed on c's entries %v after the last claim (%v after the kill), want within %v", took, time.Since(killed), reownBound)
	}
	_ = a.Shutdown(true)
	_ = b.Shutdown(true)
	return took
}

// bigData is a payload the size of a replicated WorkloadEntry (~400
// bytes: address, labels, group, network, locality, ports).
func bigData(key string) []byte {
	return data(key + "/" + strings.Repeat("x", 660))
}
