package cluster

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
)

// Defaults.
const (
	DefaultGrace        = 10 * time.Second
	DefaultReapInterval = time.Second
	DefaultRejoin       = 10 * time.Second
)

// Options configure a Table.
type Options struct {
	// Name is this replica's name, unique in the cluster (default: the
	// host name).
	Name string
	// Bind is the gossip address, HOST:PORT, used for UDP and TCP; ""
	// makes a table of one replica with no networking (no cluster
	// configured).
	Bind string
	// Advertise is the address the others reach this replica at, when
	// it is not Bind (NAT, 0.0.0.0).
	Advertise string
	// Seeds are HOST:PORT of other replicas; any one that answers is
	// enough. Unreachable seeds are retried every Rejoin.
	Seeds []string
	// SecretKey (16, 24 or 32 bytes: AES-128/192/256) encrypts and
	// authenticates gossip; nil sends it in the clear.
	SecretKey []byte
	// Grace is how long a disconnected registration stays (default 10s).
	Grace time.Duration
	// ReapInterval is how often the grace periods and dead owners are
	// checked (default 1s; a membership change checks at once).
	ReapInterval time.Duration
	// TombstoneTTL is how long a removal is remembered (default 10 ×
	// Grace, at least a minute): longer than a partition's heal plus a
	// push-pull round keeps a removed record from coming back (and one
	// that does is removed again by the grace rules).
	TombstoneTTL time.Duration
	// Rejoin is how often seeds and failed members are joined again, so a
	// healed partition or a late seed joins up (default 10s).
	Rejoin time.Duration
	// Memberlist, if set, adjusts memberlist's configuration last
	// (tests: faster timers, a Transport).
	Memberlist func(*memberlist.Config)
	Logger     *slog.Logger
	Metrics    *Metrics
	Now        func() time.Time
}

// Table is the replicated registration table. Safe for concurrent use.
type Table struct {
	o    Options
	name string

	mu    sync.Mutex
	recs  map[string]Record
	local map[string]*held
	// shared are the values besides registrations (shared.go).
	shared map[string]Shared
	// seenAt is when each record was committed here (the tombstone TTL
	// and the grace period of a disconnected record run from it; a record
	// is not written off for a dead owner until it has been here a grace
	// period, see reap).
	seenAt map[string]time.Time
	// events wait for the watcher, in commit order.
	events []Record
	watch  func(Record)
	wake   *sync.Cond
	closed bool

	ml       *memberlist.Memberlist // nil: a table of one
	queue    *memberlist.TransmitLimitedQueue
	failedMu sync.Mutex
	failed   map[string]failedMember // gone members' addresses, to rejoin
	// members are the other live members as the membership events gave
	// them (copies: memberlist's own records change under its lock);
	// burst.go and shared.go sync with them.
	members map[string]memberlist.Node
	// shareKick asks for the shared values to be sent to every member.
	shareKick chan struct{}
	kick      chan struct{}
	// queued counts broadcasts queued (under mu); burst wakes the
	// burst sync (burst.go).
	queued uint64
	burst  chan struct{}
	// deadUntil is when memberlist stops gossiping to the last member
	// that died (monotonic: nanoseconds since epoch, the table's start,
	// so a jump of the wall clock neither stretches nor ends it); until
	// then every change is synced with the live members too (burst.go).
	deadUntil atomic.Int64
	epoch     time.Time
	toDead    time.Duration
	// dirty are the keys changed here since the last direct send, peers
	// each member's direct sends (under mu; direct.go).
	dirty  map[string]struct{}
	peers  map[string]*peerSends
	direct chan struct{}
	stop   chan struct{}
	wg     sync.WaitGroup
}

// held is a registration this replica holds connections for.
type held struct {
	conns int
	data  json.RawMessage
}

// New starts a replica: binds its gossip port, joins the seeds (an
// unreachable seed is retried, not an error) and starts the reaper.
func New(o Options) (*Table, error) {
	if o.Grace <= 0 {
		o.Grace = DefaultGrace
	}
	if o.ReapInterval <= 0 {
		o.ReapInterval = DefaultReapInterval
	}
	if o.TombstoneTTL <= 0 {
		o.TombstoneTTL = max(10*o.Grace, time.Minute)
	}
	if o.Rejoin <= 0 {
		o.Rejoin = DefaultRejoin
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Name == "" {
		return nil, errors.New("cluster: a replica name is required")
	}
	t := &Table{o: o, name: o.Name, recs: map[string]Record{}, local: map[string]*held{}, shared: map[string]Shared{},
		seenAt: map[string]time.Time{}, failed: map[string]failedMember{}, members: map[string]memberlist.Node{},
		dirty: map[string]struct{}{}, peers: map[string]*peerSends{}, direct: make(chan struct{}, 1),
		shareKick: make(chan struct{}, 1),
		kick:      make(chan struct{}, 1), burst: make(chan struct{}, 1), stop: make(chan struct{}), epoch: time.Now()}
	t.wake = sync.NewCond(&t.mu)
	if o.Bind != "" {
		if err := t.startGossip(); err != nil {
			return nil, err
		}
	}
	t.wg.Add(2)
	go t.deliver()
	go t.reaper()
	return t, nil
}

// Name is this replica's name.
func (t *Table) Name() string { return t.name }

// Watch calls fn with every live record now in the table, then with every
// change of a key's winning record (tombstones included: Deleted means
// remove), in order, from one goroutine. fn must not block for long; it may
// call the Table. Call it once, before the consumer serves connections.
func (t *Table) Watch(fn func(Record)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.watch = fn
	var now []Record
	for _, r := range t.recs {
		if !r.Deleted {
			now = append(now, r)
		}
	}
	sort.Slice(now, func(i, j int) bool { return now[i].Key < now[j].Key })
	t.events = append(now, t.events...)
	t.wake.Broadcast()
}

// Claim records that this replica holds a connection for key (its proxy
// connected here) with the consumer's data. The replica becomes the owner:
// a new claim ranks above every claim it has seen for key.
func (t *Table) Claim(key string, data json.RawMessage) {
	t.mu.Lock()
	defer t.mu.Unlock()
	h := t.local[key]
	if h == nil {
		h = &held{}
		t.local[key] = h
	}
	h.conns++
	h.data = data
	w, ok := t.recs[key]
	if ok && w.Owner == t.name && w.Connected() {
		if !bytes.Equal(w.Data, data) {
			w.Seq++
			w.Data = data
			t.commitLocked(w, spreadAll)
		}
		return
	}
	t.claimLocked(key, w, ok, data)
	if ok && w.Owner != t.name && w.Connected() && t.ml != nil {
		// A proxy that moved here from a replica still shown connected:
		// most often that replica has just died, and memberlist has not
		// declared it yet and still gossips to it (burst.go). Sync the
		// table with the live members now rather than at the death.
		t.syncSoon()
	}
}

func (t *Table) claimLocked(key string, w Record, seen bool, data json.RawMessage) {
	stamp := nanos(t.o.Now())
	if seen && stamp <= w.Stamp {
		stamp = w.Stamp + 1
	}
	t.commitLocked(Record{Key: key, Owner: t.name, Stamp: stamp, Data: data}, spreadAll)
}

// Update replaces key's data (a health change) if this replica owns the
// live record; it reports whether it did. A replica that holds a
// connection without owning (a stale connection the proxy has left) keeps
// the data for a later claim.
func (t *Table) Update(key string, data json.RawMessage) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if h := t.local[key]; h != nil {
		h.data = data
	}
	w, ok := t.recs[key]
	if !ok || w.Owner != t.name || !w.Connected() {
		return false
	}
	if !bytes.Equal(w.Data, data) {
		w.Seq++
		w.Data = data
		t.commitLocked(w, spreadAll)
	}
	return true
}

// Release records that one of this replica's connections for key has
// gone. After the last, if this replica still owns the record it is marked
// disconnected and removed after the grace period unless a proxy claims it
// again, here or at any replica. A release by a replica that lost the
// record to a newer claim changes nothing (istio#43950).
func (t *Table) Release(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	h := t.local[key]
	if h == nil {
		return
	}
	if h.conns--; h.conns > 0 {
		return
	}
	delete(t.local, key)
	w, ok := t.recs[key]
	if ok && w.Owner == t.name && w.Connected() {
		w.Seq++
		w.DisconnectedAt = nanos(t.o.Now())
		t.commitLocked(w, spreadAll)
	}
}

// Delete removes key at once (its group is gone), whoever owns it, and
// forgets this replica's connections for it.
func (t *Table) Delete(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.local, key)
	if w, ok := t.recs[key]; ok && !w.Deleted {
		t.tombstoneLocked(w)
	}
}

func (t *Table) tombstoneLocked(w Record) {
	w.Seq++
	w.Deleted = true
	if w.DisconnectedAt == 0 {
		w.DisconnectedAt = nanos(t.o.Now())
	}
	t.commitLocked(w, spreadAll)
}

// Restore merges records persisted before a restart (the consumer saves
// what Watch gave it). Each is taken only if newer than what the cluster
// already told this replica. This replica's own claims among them are
// then marked disconnected by the reaper as of now, however long the
// daemon was down: every proxy gets a full grace period from the restart
// to reconnect (here or anywhere), as core/workloads does for one replica.
func (t *Table) Restore(rs []Record) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, r := range rs {
		if r.Key == "" || r.Owner == "" || r.Deleted {
			continue
		}
		if r.Owner == t.name {
			r.DisconnectedAt = 0 // same version: a peer's copy of it, if any, wins
		}
		t.mergeLocked(r, spreadAll)
	}
}

// Get returns key's live record.
func (t *Table) Get(key string) (Record, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.recs[key]
	return r, ok && !r.Deleted
}

// Records returns the live records sorted by key.
func (t *Table) Records() []Record {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]Record, 0, len(t.recs))
	for _, r := range t.recs {
		if !r.Deleted {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// commitLocked makes r key's record, tells the watcher and, for a change
// made or first heard here, spreads it as s says; then lets this replica
// reassert a connection it still holds.
func (t *Table) commitLocked(r Record, s spread) {
	t.recs[r.Key] = r
	t.seenAt[r.Key] = t.o.Now()
	if t.watch != nil { // before Watch, the replay of the table covers it
		t.events = append(t.events, r)
		t.wake.Broadcast()
	}
	if s&spreadDirect != 0 && t.ml != nil {
		t.markDirtyLocked(r.Key)
	}
	if s&spreadGossip != 0 && t.queue != nil {
		msg := encodeRecord(r)
		t.queue.QueueBroadcast(&broadcast{key: r.Key, msg: msg})
		t.o.Metrics.queued(len(msg))
		t.queued++
		if t.queue.NumQueued() >= burstQueue || t.degraded() {
			t.syncSoon()
		}
	}
	t.reassertLocked(r.Key)
}

// mergeLocked takes a remote record if it is newer than ours.
func (t *Table) mergeLocked(r Record, s spread) bool {
	if w, ok := t.recs[r.Key]; ok && !r.Newer(w) {
		return false
	}
	t.commitLocked(r, s)
	return true
}

// reassertLocked keeps a registration alive while this replica holds a
// connection for it: its own claim marked disconnected or removed by a
// survivor (it was cut off, not gone) is reasserted; a claim elsewhere
// that has ended is replaced by a new claim here. A live claim elsewhere
// wins: the proxy has moved, and this replica's connection is stale.
func (t *Table) reassertLocked(key string) {
	h := t.local[key]
	w, ok := t.recs[key]
	if h == nil || h.conns == 0 || !ok || w.Owner == t.name && w.Connected() {
		return
	}
	switch {
	case w.Owner == t.name:
		w.Seq++
		w.Deleted, w.DisconnectedAt, w.Data = false, 0, h.data
		t.commitLocked(w, spreadAll)
	case !w.Connected():
		t.claimLocked(key, w, true, h.data)
	}
}

// deliver runs the watcher.
func (t *Table) deliver() {
	defer t.wg.Done()
	t.mu.Lock()
	defer t.mu.Unlock()
	for {
		for !t.closed && (t.watch == nil || len(t.events) == 0) {
			t.wake.Wait()
		}
		if t.closed {
			return
		}
		evs, fn := t.events, t.watch
		t.events = nil
		t.mu.Unlock()
		for _, r := range evs {
			fn(r)
		}
		t.mu.Lock()
	}
}

// reaper checks grace periods and dead owners every ReapInterval and at
// every membership change.
func (t *Table) reaper() {
	defer t.wg.Done()
	tick := time.NewTicker(t.o.ReapInterval)
	defer tick.Stop()
	for {
		select {
		case <-t.stop:
			return
		case <-tick.C:
		case <-t.kick:
		}
		t.reap()
	}
}

// reap applies the lifecycle rules to every record:
//   - the owner marks its record disconnected when it holds no connection
//     for it (after a restart), and removes it after the grace period;
//   - when the owner is not a live member, the survivor with the lowest
//     name marks its connected records disconnected (the grace period
//     starts when the death is seen, or a grace period after the record
//     arrived, whichever is later) and removes them after it;
//   - tombstones are forgotten after TombstoneTTL.
func (t *Table) reap() {
	alive := t.alive()
	responsible := true
	for n := range alive {
		if n < t.name {
			responsible = false
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.o.Now()
	for key, r := range t.recs {
		if r.Deleted {
			if now.Sub(t.seenAt[key]) >= t.o.TombstoneTTL {
				delete(t.recs, key)
				delete(t.seenAt, key)
			}
			continue
		}
		mine := r.Owner == t.name
		// A record that arrived while its owner is not a member came
		// from a peer that reached us before memberlist did (a partition
		// healing): wait a grace period for the membership to catch up
		// before writing it off, so the two halves do not take each
		// other's live entries.
		orphan := !mine && !alive[r.Owner] && responsible && (r.DisconnectedAt != 0 || now.Sub(t.seenAt[key]) >= t.o.Grace)
		if !mine && !orphan {
			continue
		}
		if r.DisconnectedAt == 0 {
			if mine && t.local[key] != nil {
				continue
			}
			r.Seq++
			r.DisconnectedAt = nanos(now)
			t.commitLocked(r, spreadAll)
			if orphan {
				t.o.Logger.Info("registration orphaned: its owner left the cluster; removed after the grace period unless its proxy reconnects", "key", key, "owner", r.Owner)
			}
			continue
		}
		// The grace period runs from when this replica learnt of the
		// disconnect (seenAt: the record was committed here then), on
		// its own clock, monotonic in production: DisconnectedAt is the
		// writer's wall clock, which may be far off or jump
		// (TestClockJumpedReplica). A disconnect heard late (a healed
		// partition, a restart) gets its full grace period here.
		if now.Sub(t.seenAt[key]) >= t.o.Grace {
			t.o.Logger.Info("registration removed: its proxy did not come back within the grace period", "key", key, "owner", r.Owner, "grace", t.o.Grace)
			t.tombstoneLocked(r)
		}
	}
	t.o.Metrics.table(t.recs)
}

// Shutdown stops the replica. With leave, the others are told first (a
// clean stop); without, they find out by failure detection, as after a
// crash.
func (t *Table) Shutdown(leave bool) error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	t.wake.Broadcast()
	t.mu.Unlock()
	close(t.stop)
	var err error
	if t.ml != nil {
		if leave {
			err = t.ml.Leave(time.Second)
		}
		err = errors.Join(err, t.ml.Shutdown())
	}
	t.wg.Wait()
	return err
}
