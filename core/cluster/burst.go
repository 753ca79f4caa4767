package cluster

import "time"

// A burst of registrations (a replica restarting with its proxies, a
// fleet booting) would spread by gossip at a few records per member per
// gossip interval: 500 took 43 s to reach every replica with memberlist's
// defaults, the rest waiting for the 30 s push-pull. When the broadcast
// queue holds burstQueue records or more, the replica instead syncs its
// whole table with every member at once (memberlist's push-pull over TCP,
// which Join runs with members already known), then drops the queued
// broadcasts if every member answered and nothing was queued meanwhile:
// they hold nothing the members lack.
const (
	burstQueue = 64
	// burstSettle lets a burst finish before the sync; burstGap spaces
	// syncs while one goes on.
	burstSettle = 100 * time.Millisecond
	burstGap    = 500 * time.Millisecond
)

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
		var addrs []string
		self := t.ml.LocalNode().Name
		for _, n := range t.ml.Members() {
			if n.Name != self {
				addrs = append(addrs, n.Address())
			}
		}
		if len(addrs) == 0 {
			continue
		}
		start := time.Now()
		n, err := t.ml.Join(addrs)
		t.mu.Lock()
		quiet := t.queued == seq
		if n == len(addrs) && quiet {
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
