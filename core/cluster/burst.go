package cluster

import (
	"time"

	"github.com/hashicorp/memberlist"
)

// A burst of registrations (a replica restarting with its proxies, a
// fleet booting) would spread by gossip at a few records per member per
// gossip interval: 500 took 43 s to reach every replica with memberlist's
// defaults, the rest waiting for the 30 s push-pull. When the broadcast
// queue holds burstQueue records or more, the replica instead syncs its
// whole table with every live member at once (memberlist's push-pull over
// TCP, which Join runs with members already known), then drops the queued
// broadcasts if every member answered and nothing was queued meanwhile:
// they hold nothing the members lack.
//
// The same sync runs for every change while a member has recently died.
// memberlist keeps gossiping to a dead member for GossipToTheDeadTime (30 s
// by default, so that one declared dead by mistake hears it and refutes),
// and each gossip target draws its own records from the queue, each record
// going out RetransmitMult times in all: with three replicas and one dead,
// some of the survivors' claims and orphan marks went only to the dead one
// and the other survivor saw them at the next push-pull, 30 s later
// (issue #32: 5 of 15 kills took over 30 s to re-own). So from a death
// until GossipToTheDeadTime after it, every change is also pushed to the
// live members within burstSettle+burstGap (TestReownAfterKill).
const (
	burstQueue = 64
	// burstSettle lets a burst finish before the sync; burstGap spaces
	// syncs while one goes on.
	burstSettle = 100 * time.Millisecond
	burstGap    = 500 * time.Millisecond
)

// degraded reports whether a member died recently enough that memberlist
// still gossips to it (see above).
func (t *Table) degraded() bool { return time.Now().UnixNano() < t.deadUntil.Load() }

// syncSoon wakes the burst sync.
func (t *Table) syncSoon() {
	select {
	case t.burst <- struct{}{}:
	default:
	}
}

// burstSync runs the syncs until the table stops.
func (t *Table) burstSync() {
	defer t.wg.Done()
	for {
		select {
		case <-t.stop:
			return
		case <-t.burst:
		}
		select {
		case <-t.stop:
			return
		case <-time.After(burstSettle):
		}
		t.mu.Lock()
		seq := t.queued
		t.mu.Unlock()
		// Only members known alive: a push-pull to a suspect or dead one
		// waits for TCPTimeout (10 s by default) before the next.
		var addrs []string
		others := 0
		self := t.ml.LocalNode().Name
		for _, n := range t.ml.Members() {
			if n.Name == self {
				continue
			}
			others++
			if n.State == memberlist.StateAlive {
				addrs = append(addrs, n.Address())
			}
		}
		if len(addrs) == 0 {
			continue
		}
		start := time.Now()
		n, err := t.ml.Join(addrs)
		t.mu.Lock()
		// A suspect left out may come back without a push-pull: it still
		// needs the queued broadcasts.
		if n == len(addrs) && others == len(addrs) && t.queued == seq {
			t.queue.Reset()
		}
		t.mu.Unlock()
		t.o.Metrics.burstSync()
		t.o.Logger.Debug("burst: whole table synced with the members", "members", n, "of", len(addrs), "took", time.Since(start), "err", err)
		select {
		case <-t.stop:
			return
		case <-time.After(burstGap):
		}
	}
}
