package cluster

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/hashicorp/memberlist"
)

// Shared is a value every replica holds besides the registrations: the
// cluster's CA, join tokens, their revocations and use counts (the daemon
// decides what). For one key the highest Version wins, then the greater
// Origin name; a value is never reaped (its publisher keeps what it means
// small). Publishers choose versions that only grow for a key (a use
// count is its own version), so a merge never goes back.
type Shared struct {
	Key     string `json:"k"`
	Version int64  `json:"n"`
	// Origin is the replica that published it.
	Origin string `json:"o"`
	Value  []byte `json:"v"`
}

func (a Shared) newer(b Shared) bool {
	if a.Version != b.Version {
		return a.Version > b.Version
	}
	return a.Origin > b.Origin
}

// Publish sets key's shared value on every replica, unless a value of
// that key with this version or a later one is already here (from any
// replica: publishing what is known again is a no-op); it reports whether
// it did.
// It is gossiped and, since a value may not fit a gossip packet (a CA
// bundle) and must reach every replica within seconds (a revocation),
// every shared value is also sent to every live member at once over TCP
// (sendShared), as it is every Rejoin and to a member that joins.
func (t *Table) Publish(key string, version int64, value []byte) bool {
	s := Shared{Key: key, Version: version, Origin: t.name, Value: value}
	t.mu.Lock()
	ok := false
	if w, seen := t.shared[key]; !seen || version > w.Version {
		ok = t.mergeSharedLocked(s, true)
	}
	t.mu.Unlock()
	if ok && t.ml != nil {
		t.shareSoon()
	}
	return ok
}

// SharedValue returns key's shared value.
func (t *Table) SharedValue(key string) (Shared, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.shared[key]
	return s, ok
}

// SharedValues returns the shared values whose key starts with prefix,
// sorted by key.
func (t *Table) SharedValues(prefix string) []Shared {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []Shared
	for k, s := range t.shared {
		if strings.HasPrefix(k, prefix) {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// mergeSharedLocked takes s if it is newer than key's value here, and
// gossips it if asked (a value new to this replica is passed on, as a
// record is).
func (t *Table) mergeSharedLocked(s Shared, gossip bool) bool {
	if w, ok := t.shared[s.Key]; ok && !s.newer(w) {
		return false
	}
	t.shared[s.Key] = s
	if gossip && t.queue != nil {
		msg := encodeShared(s)
		t.queue.QueueBroadcast(&broadcast{key: "\x00shared/" + s.Key, msg: msg})
		t.o.Metrics.queued(len(msg))
		t.queued++
	}
	return true
}

// fullState is every shared value, as sendShared sends it
// (msgStateShared); Records is there for a later use and empty now.
type fullState struct {
	Records []Record `json:"r"`
	Shared  []Shared `json:"s"`
}

// shareSoon wakes sendShared (in the rejoin loop).
func (t *Table) shareSoon() {
	select {
	case t.shareKick <- struct{}{}:
	default:
	}
}

// sendShared sends every shared value to every live member, each over
// its own TCP stream at once (memberlist's SendReliable: no size limit,
// delivered or an error); a replica of the previous release drops the
// message as of an unknown kind. Push-pull does not carry them (see
// LocalState).
func (t *Table) sendShared() {
	t.mu.Lock()
	ss := make([]Shared, 0, len(t.shared))
	for _, s := range t.shared {
		ss = append(ss, s)
	}
	t.mu.Unlock()
	if len(ss) == 0 {
		return
	}
	msg := encodeFullState(nil, ss)
	t.failedMu.Lock()
	nodes := make([]memberlist.Node, 0, len(t.members))
	for _, n := range t.members {
		nodes = append(nodes, n)
	}
	t.failedMu.Unlock()
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := t.ml.SendReliable(&n, msg); err != nil {
				t.o.Logger.Debug("shared values not sent", "member", n.Name, "err", err)
				return
			}
			t.o.Metrics.sent("shared", len(msg))
		}()
	}
	wg.Wait()
}

func encodeShared(s Shared) []byte {
	var b bytes.Buffer
	b.WriteByte(msgShared)
	_ = json.NewEncoder(&b).Encode(s)
	return bytes.TrimRight(b.Bytes(), "\n")
}

func encodeFullState(rs []Record, ss []Shared) []byte {
	var b bytes.Buffer
	b.WriteByte(msgStateShared)
	_ = json.NewEncoder(&b).Encode(fullState{Records: rs, Shared: ss})
	return bytes.TrimRight(b.Bytes(), "\n")
}

// decodeAll reads any gossip message: records and shared values.
func decodeAll(msg []byte) ([]Record, []Shared, error) {
	if len(msg) == 0 || msg[0] != msgShared && msg[0] != msgStateShared {
		rs, err := decode(msg)
		return rs, nil, err
	}
	var st fullState
	if msg[0] == msgShared {
		var s Shared
		if err := json.Unmarshal(msg[1:], &s); err != nil {
			return nil, nil, fmt.Errorf("shared value: %w", err)
		}
		st.Shared = []Shared{s}
	} else if err := json.Unmarshal(msg[1:], &st); err != nil {
		return nil, nil, fmt.Errorf("state: %w", err)
	}
	for i, r := range st.Records {
		if r.Key == "" || r.Owner == "" {
			return nil, nil, fmt.Errorf("record %d: key and owner are required", i)
		}
	}
	for i, s := range st.Shared {
		if s.Key == "" || s.Origin == "" {
			return nil, nil, fmt.Errorf("shared value %d: key and origin are required", i)
		}
	}
	return st.Records, st.Shared, nil
}
