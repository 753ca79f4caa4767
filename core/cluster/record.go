// Package cluster owns replication between baremeshd replicas: a table of
// registrations (one record per auto-registered WorkloadEntry, keyed
// "namespace/name") that every replica holds in full, kept in step over
// hashicorp/memberlist (membership and failure detection, broadcasts
// through a TransmitLimitedQueue, push-pull anti-entropy through the
// Delegate's LocalState/MergeRemoteState). It decides who owns an entry
// (the replica holding its proxy's connection), resolves competing claims
// deterministically, and removes entries whose proxy never came back after
// the grace period, on the owner or, when the owner is gone, on a
// survivor.
//
// It knows nothing of WorkloadEntries: a record's Data is the consumer's
// JSON (core/workloads). It imports nothing of ours outside core.
package cluster

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// Record is one registration as every replica holds it. A record is
// immutable once published; a change is a new record with a higher
// version (see Newer).
type Record struct {
	// Key is the registration's name, "namespace/name".
	Key string `json:"k"`
	// Owner is the replica that made the claim: while Connected, the one
	// holding the proxy's connection; after that, the last one that did.
	Owner string `json:"o"`
	// Stamp identifies the claim: Unix nanoseconds of the connect, raised
	// above every stamp the claiming replica has seen for Key, so that a
	// reconnect elsewhere always wins over the claim it replaces even with
	// clocks a little apart.
	Stamp int64 `json:"c"`
	// Seq orders the changes within one claim (data updates, the
	// disconnect mark, the tombstone, the owner's reassertion).
	Seq uint64 `json:"s"`
	// DisconnectedAt is Unix nanoseconds of the disconnect (or of the
	// moment a survivor saw the owner die); 0 while connected.
	DisconnectedAt int64 `json:"d,omitempty"`
	// Deleted marks a tombstone: the registration is gone. Tombstones are
	// kept for a while so that a replica that has not heard of the removal
	// cannot bring the record back.
	Deleted bool `json:"x,omitempty"`
	// Data is the consumer's payload, as JSON.
	Data json.RawMessage `json:"v,omitempty"`
}

// Connected reports whether the record's proxy is connected to its owner.
func (r Record) Connected() bool { return !r.Deleted && r.DisconnectedAt == 0 }

// Newer reports whether a wins over b for the same key. The order is
// total and the same on every replica: the later claim (Stamp, then Owner
// name), then within one claim the later change (Seq). Two replicas can
// make different changes of one claim with the same Seq (the owner's
// update and a survivor's disconnect mark while they are cut apart): then
// a tombstone wins over a disconnected record, which wins over a
// connected one (the owner, still holding the connection, reasserts it
// with a higher Seq), then the later disconnect, then the greater data,
// so that every replica keeps the same one. (Before, such a tie kept each
// replica's own: the survivors kept the entry disconnected for good,
// TestUpdateDuringPartition.) Two records equal in all of these are the
// same record.
func (a Record) Newer(b Record) bool {
	switch {
	case a.Stamp != b.Stamp:
		return a.Stamp > b.Stamp
	case a.Owner != b.Owner:
		return a.Owner > b.Owner
	case a.Seq != b.Seq:
		return a.Seq > b.Seq
	case a.rank() != b.rank():
		return a.rank() > b.rank()
	case a.DisconnectedAt != b.DisconnectedAt:
		return a.DisconnectedAt > b.DisconnectedAt
	default:
		return bytes.Compare(a.Data, b.Data) > 0
	}
}

// rank orders the changes of one claim at equal Seq (see Newer).
func (r Record) rank() int {
	switch {
	case r.Deleted:
		return 2
	case r.DisconnectedAt != 0:
		return 1
	}
	return 0
}

// message kinds on the wire (the first byte of every gossip message).
const (
	msgRecord byte = 1 // one Record, JSON
	msgState  byte = 2 // push-pull: []Record, JSON
	// shared values (shared.go)
	msgShared      byte = 3 // one Shared, JSON
	msgStateShared byte = 4 // push-pull: fullState, JSON
)

func encodeRecord(r Record) []byte {
	var b bytes.Buffer
	b.WriteByte(msgRecord)
	_ = json.NewEncoder(&b).Encode(r) // a Record always encodes
	return bytes.TrimRight(b.Bytes(), "\n")
}

func encodeState(rs []Record) []byte {
	var b bytes.Buffer
	b.WriteByte(msgState)
	_ = json.NewEncoder(&b).Encode(rs)
	return bytes.TrimRight(b.Bytes(), "\n")
}

// decode reads a gossip message: one record or a full state. Bad input
// (a peer of another version, a corrupt message) is an error naming what
// was wrong; the caller logs it and drops the message.
func decode(msg []byte) ([]Record, error) {
	if len(msg) == 0 {
		return nil, fmt.Errorf("empty message")
	}
	var rs []Record
	switch msg[0] {
	case msgRecord:
		var r Record
		if err := json.Unmarshal(msg[1:], &r); err != nil {
			return nil, fmt.Errorf("record: %w", err)
		}
		rs = []Record{r}
	case msgState:
		if err := json.Unmarshal(msg[1:], &rs); err != nil {
			return nil, fmt.Errorf("state: %w", err)
		}
	default:
		return nil, fmt.Errorf("unknown message kind %d (a replica of another version?)", msg[0])
	}
	for i, r := range rs {
		if r.Key == "" || r.Owner == "" {
			return nil, fmt.Errorf("record %d: key and owner are required", i)
		}
	}
	return rs, nil
}

func nanos(t time.Time) int64 { return t.UnixNano() }
