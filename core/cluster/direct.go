package cluster

import (
	"maps"
	"sort"
	"time"

	"github.com/hashicorp/memberlist"
)

// Gossip is best effort: a record goes out RetransmitMult times in all
// (4 with three replicas), each time to whichever member that gossip round
// picked, in UDP packets a busy machine may drop, and memberlist keeps
// gossiping to a dead member for GossipToTheDeadTime. A few records under
// the burst threshold (burst.go) could so miss a live member until the
// next push-pull, 30 s later by default (issue #32: a daemon test waited
// 30 s for one replica to hold 30 registrations made on another). So
// every change made here is also sent, within directSettle, to every live
// member over TCP (memberlist's SendReliable: delivered or an error), as
// one state message per directChunk records. A member's failed send is
// retried after directRetry, with whatever changed meanwhile; a member
// still busy with one send gets the next one after it, so a slow or
// cut-off member holds up no other. A receiver does not send such records
// on: the sender sent them to every member it knows (a member that joins
// is synced with at its join, burst.go). The previous release takes the
// message as it takes a push-pull state.
const (
	directSettle = 20 * time.Millisecond
	directRetry  = 500 * time.Millisecond
	directChunk  = 1000
)

// spread says how a committed change travels.
type spread uint8

const (
	spreadNone   spread = 0
	spreadGossip spread = 1 // memberlist's broadcast queue
	spreadDirect spread = 2 // direct sends (this file)
	spreadAll           = spreadGossip | spreadDirect
)

// peerSends is one member's direct sends: at most one at a time, and the
// keys changed since it started.
type peerSends struct {
	busy    bool
	backlog map[string]struct{}
}

// markDirtyLocked queues key for the direct sends.
func (t *Table) markDirtyLocked(key string) {
	t.dirty[key] = struct{}{}
	t.directSoon()
}

func (t *Table) directSoon() {
	select {
	case t.direct <- struct{}{}:
	default:
	}
}

// directSends runs the direct sends until the table stops.
func (t *Table) directSends() {
	defer t.wg.Done()
	for {
		select {
		case <-t.stop:
			return
		case <-t.direct:
		}
		select { // gather a burst's changes into one message
		case <-t.stop:
			return
		case <-time.After(directSettle):
		}
		t.flushDirect()
	}
}

// flushDirect hands the changed keys to every live member's sends and
// starts a send to each member that is not busy.
func (t *Table) flushDirect() {
	t.failedMu.Lock()
	members := maps.Clone(t.members)
	t.failedMu.Unlock()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	keys := t.dirty
	t.dirty = map[string]struct{}{}
	for name := range t.peers {
		if _, ok := members[name]; !ok {
			delete(t.peers, name) // gone: it gets the table when it joins again
		}
	}
	for name, n := range members {
		p := t.peers[name]
		if p == nil {
			p = &peerSends{backlog: map[string]struct{}{}}
			t.peers[name] = p
		}
		maps.Copy(p.backlog, keys)
		if p.busy || len(p.backlog) == 0 {
			continue
		}
		p.busy = true
		batch := p.backlog
		p.backlog = map[string]struct{}{}
		msgs := t.stateMessagesLocked(batch)
		t.wg.Add(1)
		go t.sendDirect(n, batch, msgs)
	}
}

// stateMessagesLocked encodes the current records of keys (tombstones
// included; a key forgotten since is left out), directChunk per message,
// in key order.
func (t *Table) stateMessagesLocked(keys map[string]struct{}) [][]byte {
	ks := make([]string, 0, len(keys))
	for k := range keys {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	var msgs [][]byte
	rs := make([]Record, 0, min(len(ks), directChunk))
	for _, k := range ks {
		if r, ok := t.recs[k]; ok {
			rs = append(rs, r)
		}
		if len(rs) == directChunk {
			msgs = append(msgs, encodeState(rs))
			rs = rs[:0]
		}
	}
	if len(rs) > 0 {
		msgs = append(msgs, encodeState(rs))
	}
	return msgs
}

// sendDirect sends msgs to n; on failure the keys go back to the member's
// backlog, retried after directRetry.
func (t *Table) sendDirect(n memberlist.Node, keys map[string]struct{}, msgs [][]byte) {
	defer t.wg.Done()
	var err error
	for _, m := range msgs {
		if err = t.ml.SendReliable(&n, m); err != nil {
			break
		}
		t.o.Metrics.sent("direct", len(m))
	}
	if err != nil {
		t.o.Logger.Debug("direct send failed; retried", "member", n.Name, "records", len(keys), "err", err)
		select {
		case <-t.stop:
			return
		case <-time.After(directRetry):
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.peers[n.Name]
	if p == nil {
		return // gone meanwhile
	}
	p.busy = false
	if err != nil {
		maps.Copy(p.backlog, keys)
	}
	if len(p.backlog) > 0 {
		t.directSoon()
	}
}
