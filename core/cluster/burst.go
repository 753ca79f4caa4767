package cluster

import (
	"errors"
	"slices"
	"sync"
	"time"
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
// The same sync runs when a member joins, so that it holds the table
// whichever member it joined through and whatever was queued before it
// came; and for every change while a member has recently died.
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
func (t *Table) degraded() bool { return int64(time.Since(t.epoch)) < t.deadUntil.Load() }

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
		addrs := t.memberAddrs()
		if len(addrs) == 0 {
			continue
		}
		start := time.Now()
		n, err := t.pushPull(addrs)
		// The queue is dropped only if the sync reached every member
		// there is now: one that joined meanwhile (through another
		// member, perhaps before that one had our table) may lack what
		// the queue holds.
		now := t.memberAddrs()
		t.mu.Lock()
		if n == len(addrs) && t.queued == seq && slices.Equal(now, addrs) {
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

// memberAddrs are the other live members' addresses, sorted, as the
// membership events gave them (reading memberlist's own node records
// races with its updates).
func (t *Table) memberAddrs() []string {
	t.failedMu.Lock()
	addrs := make([]string, 0, len(t.members))
	for _, n := range t.members {
		addrs = append(addrs, n.Address())
	}
	t.failedMu.Unlock()
	slices.Sort(addrs)
	return addrs
}

// pushPull syncs the table with each address at once (memberlist's Join
// with a known member is a push-pull), so that a member that died and is
// not yet known dead, whose dial waits for TCPTimeout (10 s by default),
// does not hold up the others'. It returns how many answered.
func (t *Table) pushPull(addrs []string) (int, error) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	n := 0
	for _, a := range addrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k, err := t.ml.Join([]string{a})
			mu.Lock()
			n += k
			errs = append(errs, err)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return n, errors.Join(errs...)
}
