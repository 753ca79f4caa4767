package cluster

import (
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"time"

	"github.com/hashicorp/memberlist"
)

// startGossip creates the memberlist, joins the seeds and starts the
// rejoin loop.
func (t *Table) startGossip() error {
	host, port, err := splitHostPort(t.o.Bind)
	if err != nil {
		return fmt.Errorf("cluster: bind %q: %w", t.o.Bind, err)
	}
	c := memberlist.DefaultLANConfig()
	c.Name = t.name
	c.BindAddr, c.BindPort = host, port
	c.AdvertisePort = port
	if t.o.Advertise != "" {
		if c.AdvertiseAddr, c.AdvertisePort, err = splitHostPort(t.o.Advertise); err != nil {
			return fmt.Errorf("cluster: advertise %q: %w", t.o.Advertise, err)
		}
	}
	c.SecretKey = t.o.SecretKey
	c.Delegate = delegate{t}
	c.Events = events{t}
	c.Logger = slog.NewLogLogger(t.o.Logger.With("component", "memberlist").Handler(), slog.LevelDebug)
	if t.o.Memberlist != nil {
		t.o.Memberlist(c)
	}
	t.toDead = c.GossipToTheDeadTime
	t.queue = &memberlist.TransmitLimitedQueue{RetransmitMult: c.RetransmitMult}
	ml, err := memberlist.Create(c)
	if err != nil {
		return fmt.Errorf("cluster: start gossip on %s: %w", t.o.Bind, err)
	}
	t.ml = ml
	t.queue.NumNodes = ml.NumMembers
	if len(t.o.Seeds) > 0 {
		if n, err := ml.Join(t.o.Seeds); err != nil {
			t.o.Logger.Warn("no seed answered; retrying", "seeds", t.o.Seeds, "every", t.o.Rejoin, "err", err)
		} else {
			t.o.Logger.Info("joined the cluster", "seeds answered", n, "members", ml.NumMembers())
		}
	}
	t.wg.Add(3)
	go t.rejoin()
	go t.burstSync()
	go t.directSends()
	return nil
}

// Addr is the address this replica gossips on ("" without a cluster).
func (t *Table) Addr() string {
	if t.ml == nil {
		return ""
	}
	n := t.ml.LocalNode()
	return net.JoinHostPort(n.Addr.String(), strconv.Itoa(int(n.Port)))
}

// Member is one replica as this one sees it.
type Member struct {
	Name  string `json:"name"`
	Addr  string `json:"addr"`
	State string `json:"state"`
}

// Members returns the live members (alive or suspect), this one included,
// sorted by name.
func (t *Table) Members() []Member {
	if t.ml == nil {
		return []Member{{Name: t.name, State: "alive"}}
	}
	var out []Member
	for _, n := range t.ml.Members() {
		st := map[memberlist.NodeStateType]string{memberlist.StateAlive: "alive", memberlist.StateSuspect: "suspect"}[n.State]
		out = append(out, Member{Name: n.Name, Addr: n.Address(), State: st})
	}
	slices.SortFunc(out, func(a, b Member) int { return cmpString(a.Name, b.Name) })
	return out
}

// alive is the set of live member names (suspects count: a member is
// only written off once memberlist declares it dead).
func (t *Table) alive() map[string]bool {
	out := map[string]bool{t.name: true}
	if t.ml == nil {
		return out
	}
	for _, n := range t.ml.Members() {
		out[n.Name] = true
	}
	return out
}

// rejoin sends the shared values to every member when asked and every
// Rejoin, and joins the seeds and the members that went away again every
// Rejoin while they are missing: memberlist does not
// go back to a member it declared dead, so without this a healed
// partition would stay two clusters.
func (t *Table) rejoin() {
	defer t.wg.Done()
	tick := time.NewTicker(t.o.Rejoin)
	defer tick.Stop()
	for {
		select {
		case <-t.stop:
			return
		case <-t.shareKick:
			t.sendShared()
			continue
		case <-tick.C:
			t.sendShared() // anti-entropy of the shared values
		}
		t.failedMu.Lock()
		var addrs []string
		for name, f := range t.failed {
			if time.Since(f.at) > forgetFailed {
				delete(t.failed, name)
				continue
			}
			addrs = append(addrs, f.addr)
		}
		t.failedMu.Unlock()
		if len(t.o.Seeds) > 0 && t.ml.NumMembers() <= 1 {
			addrs = append(addrs, t.o.Seeds...)
		}
		if len(addrs) == 0 {
			continue
		}
		if n, err := t.ml.Join(addrs); n > 0 {
			t.o.Logger.Info("rejoined", "answered", n, "members", t.ml.NumMembers())
		} else {
			t.o.Logger.Debug("rejoin: no one answered", "addrs", addrs, "err", err)
		}
	}
}

// forgetFailed is how long a gone member is rejoined.
const forgetFailed = 24 * time.Hour

type failedMember struct {
	addr string
	at   time.Time
}

// delegate is memberlist's hook into the table.
type delegate struct{ t *Table }

func (delegate) NodeMeta(int) []byte { return nil }

// NotifyMsg takes a broadcast record; one new to this replica is passed
// on (memberlist does not relay user messages itself).
func (d delegate) NotifyMsg(msg []byte) {
	kind := "broadcast"
	if len(msg) > 0 && msg[0] == msgState {
		kind = "direct"
	}
	d.t.o.Metrics.received(kind, len(msg))
	rs, ss, err := decodeAll(msg)
	if err != nil {
		d.t.o.Logger.Warn("gossip message dropped", "err", err)
		return
	}
	// A broadcast record new here is passed on by gossip, as before;
	// records sent directly (a state message: a broadcast carries one
	// record) went to every member the sender knows, and are not sent on
	// (direct.go).
	s := spreadGossip
	if msg[0] == msgState {
		s = spreadNone
	}
	d.t.mu.Lock()
	defer d.t.mu.Unlock()
	for _, r := range rs {
		d.t.mergeLocked(r, s)
	}
	for _, s := range ss {
		d.t.mergeSharedLocked(s, true)
	}
}

func (d delegate) GetBroadcasts(overhead, limit int) [][]byte {
	msgs := d.t.queue.GetBroadcasts(overhead, limit)
	for _, m := range msgs {
		d.t.o.Metrics.sent("broadcast", len(m))
	}
	return msgs
}

// LocalState is the whole table of records, tombstones included, for
// push-pull.
func (d delegate) LocalState(bool) []byte {
	d.t.mu.Lock()
	rs := make([]Record, 0, len(d.t.recs))
	for _, r := range d.t.recs {
		rs = append(rs, r)
	}
	d.t.mu.Unlock()
	// Records only, in the previous release's format (shared values go
	// by their own messages, shared.go), so replicas of both releases
	// keep their anti-entropy during an upgrade.
	msg := encodeState(rs)
	d.t.o.Metrics.sent("pushpull", len(msg))
	return msg
}

// MergeRemoteState merges a peer's table; what is newer there wins here.
// It is not gossiped again: the peer has it, and push-pull reaches the
// rest.
func (d delegate) MergeRemoteState(buf []byte, _ bool) {
	d.t.o.Metrics.received("pushpull", len(buf))
	rs, ss, err := decodeAll(buf)
	if err != nil {
		d.t.o.Logger.Warn("push-pull state dropped", "err", err)
		return
	}
	d.t.mu.Lock()
	defer d.t.mu.Unlock()
	for _, r := range rs {
		d.t.mergeLocked(r, spreadNone)
	}
	for _, s := range ss {
		d.t.mergeSharedLocked(s, false)
	}
}

// events follows membership: a failed member is remembered for rejoin,
// and every change runs the reaper at once. memberlist calls it with its
// node lock held, so it takes failedMu only, never Table.mu (which is
// held around calls into memberlist's queue).
type events struct{ t *Table }

func (e events) NotifyJoin(n *memberlist.Node) {
	e.t.failedMu.Lock()
	delete(e.t.failed, n.Name)
	if n.Name != e.t.name {
		e.t.members[n.Name] = *n
	}
	e.t.failedMu.Unlock()
	e.t.shareSoon() // the newcomer gets the shared values (shared.go)
	if n.Name != e.t.name {
		// and the table: it synced with the member it joined through
		// only, which may not have had our latest changes (burst.go).
		e.t.syncSoon()
	}
	e.t.o.Logger.Info("member joined", "member", n.Name, "addr", n.Address())
	e.kick()
}

func (e events) NotifyLeave(n *memberlist.Node) {
	// n.State is not updated before this call (memberlist sets the state
	// on its own record), so a clean leave cannot be told from a failure
	// here: both are rejoined, for forgetFailed; a replica that left for
	// good costs one refused dial per Rejoin.
	e.t.failedMu.Lock()
	e.t.failed[n.Name] = failedMember{addr: n.Address(), at: time.Now()}
	delete(e.t.members, n.Name)
	e.t.failedMu.Unlock()
	e.t.o.Logger.Warn("member gone", "member", n.Name, "addr", n.Address())
	// Until memberlist stops gossiping to it, changes are also synced
	// with the live members (burst.go); the first sync carries what
	// went to it while it was suspect.
	e.t.deadUntil.Store(int64(time.Since(e.t.epoch) + e.t.toDead))
	e.t.syncSoon()
	e.kick()
}

func (e events) NotifyUpdate(n *memberlist.Node) {
	e.t.failedMu.Lock()
	if _, ok := e.t.members[n.Name]; ok {
		e.t.members[n.Name] = *n
	}
	e.t.failedMu.Unlock()
}

func (e events) kick() {
	select {
	case e.t.kick <- struct{}{}:
	default:
	}
}

// broadcast is one record queued for gossip; a newer record of the same
// key replaces it in the queue.
type broadcast struct {
	key string
	msg []byte
}

func (b *broadcast) Invalidates(o memberlist.Broadcast) bool {
	ob, ok := o.(*broadcast)
	return ok && ob.key == b.key
}
func (b *broadcast) Name() string    { return b.key }
func (b *broadcast) Message() []byte { return b.msg }
func (b *broadcast) Finished()       {}

func splitHostPort(s string) (string, int, error) {
	host, p, err := net.SplitHostPort(s)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("port %q is not a number 0-65535", p)
	}
	return host, port, nil
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
