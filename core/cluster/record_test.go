package cluster

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/baremesh/baremesh/core/testkit"
)

func TestNewerIsATotalOrder(t *testing.T) {
	base := Record{Key: "k", Owner: "b", Stamp: 100, Seq: 3}
	for _, tc := range []struct {
		name string
		a    Record
	}{
		{"later claim", Record{Key: "k", Owner: "a", Stamp: 101}},
		{"same stamp, higher owner name", Record{Key: "k", Owner: "c", Stamp: 100}},
		{"same claim, later change", Record{Key: "k", Owner: "b", Stamp: 100, Seq: 4}},
		{"same claim and seq, tombstone", Record{Key: "k", Owner: "b", Stamp: 100, Seq: 3, Deleted: true}},
		{"same claim and seq, disconnected", Record{Key: "k", Owner: "b", Stamp: 100, Seq: 3, DisconnectedAt: 5}},
		{"same claim and seq, other data", Record{Key: "k", Owner: "b", Stamp: 100, Seq: 3, Data: data("x")}},
	} {
		if !tc.a.Newer(base) || base.Newer(tc.a) {
			t.Errorf("%s: want %+v strictly newer than %+v", tc.name, tc.a, base)
		}
	}
	if base.Newer(base) {
		t.Error("a record is newer than itself")
	}
	// Changes of one claim with the same Seq: exactly one of two
	// different ones wins, in both directions.
	same := []Record{
		{Key: "k", Owner: "b", Stamp: 100, Seq: 3, Data: data("1")},
		{Key: "k", Owner: "b", Stamp: 100, Seq: 3, Data: data("2")},
		{Key: "k", Owner: "b", Stamp: 100, Seq: 3, DisconnectedAt: 7},
		{Key: "k", Owner: "b", Stamp: 100, Seq: 3, DisconnectedAt: 8},
		{Key: "k", Owner: "b", Stamp: 100, Seq: 3, DisconnectedAt: 8, Deleted: true},
	}
	for i, x := range same {
		for j, y := range same {
			if i != j && x.Newer(y) == y.Newer(x) {
				t.Errorf("%+v and %+v: Newer both ways is %v", x, y, x.Newer(y))
			}
		}
	}
}

func TestDecodeRejectsBadInput(t *testing.T) {
	for _, msg := range [][]byte{nil, {9, '{', '}'}, append([]byte{msgRecord}, "{"...), append([]byte{msgRecord}, `{"k":"x"}`...),
		append([]byte{msgState}, `[{"o":"a"}]`...)} {
		if _, err := decode(msg); err == nil {
			t.Errorf("decode(%q): no error", msg)
		}
	}
	r := Record{Key: "ns/x", Owner: "a", Stamp: 1, Data: data("1")}
	got, err := decode(encodeRecord(r))
	if err != nil || len(got) != 1 || got[0].Key != r.Key || !bytes.Equal(got[0].Data, r.Data) {
		t.Errorf("round trip: %+v, %v", got, err)
	}
}

// TestOneReplica: without a bind address the table is local, and the
// owner's grace rules still apply.
func TestOneReplica(t *testing.T) {
	tbl, err := New(Options{Name: "solo", Grace: grace, ReapInterval: 20e6})
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Shutdown(true)
	ev := &eventLog{}
	tbl.Claim("ns/x", data("1"))
	tbl.Watch(ev.add)
	tbl.Claim("ns/x", data("1")) // a second proxy claiming the same entry
	tbl.Release("ns/x")
	if r, ok := tbl.Get("ns/x"); !ok || !r.Connected() {
		t.Fatalf("after one of two releases: %+v %v, want connected", r, ok)
	}
	tbl.Release("ns/x")
	if r, _ := tbl.Get("ns/x"); r.Connected() {
		t.Fatalf("after the last release: %+v, want disconnected", r)
	}
	waitGone(t, tbl, "ns/x")
	ev.removal(t, "ns/x")
	if len(tbl.Members()) != 1 || tbl.NumMembers() != 1 {
		t.Errorf("members %v", tbl.Members())
	}
}

// TestRestore: a record persisted as connected by this replica comes back
// disconnected and is removed after the grace period unless its proxy
// claims it again; an older record than the table's is ignored.
func TestRestore(t *testing.T) {
	tbl, err := New(Options{Name: "solo", Grace: grace, ReapInterval: 20e6})
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Shutdown(true)
	tbl.Claim("ns/new", data("2"))
	cur, _ := tbl.Get("ns/new")
	// The grace period is measured from before the restore: a poll below
	// that took long must not make a full grace period look short (#32).
	restored := time.Now()
	tbl.Restore([]Record{
		{Key: "ns/back", Owner: "solo", Stamp: 1, Data: data("1")},
		{Key: "ns/gone", Owner: "solo", Stamp: 1, Seq: 1, DisconnectedAt: 1, Data: data("1")}, // down for decades
		{Key: "ns/new", Owner: "solo", Stamp: cur.Stamp - 1, Data: data("old")},
	})
	testkit.Eventually(t, "restored records marked disconnected", func() bool {
		a, _ := tbl.Get("ns/back")
		b, _ := tbl.Get("ns/gone")
		return a.DisconnectedAt != 0 && b.DisconnectedAt != 0
	})
	tbl.Claim("ns/back", data("1"))
	waitGone(t, tbl, "ns/gone")
	if since := time.Since(restored); since < grace {
		t.Errorf("ns/gone removed %v after the restore, want a full grace period (%v)", since, grace)
	}
	if r, ok := tbl.Get("ns/back"); !ok || !r.Connected() || r.Stamp <= 1 {
		t.Errorf("ns/back: %+v %v, want a new connected claim", r, ok)
	}
	if r, _ := tbl.Get("ns/new"); !bytes.Equal(r.Data, data("2")) {
		t.Errorf("ns/new: %+v, the older restored record won", r)
	}
}

// registrations is the interface core/workloads declares for the table
// (a copy: the consumer owns it); the Table must keep satisfying it.
type registrations interface {
	Claim(key string, data json.RawMessage)
	Update(key string, data json.RawMessage) bool
	Release(key string)
	Delete(key string)
	Restore([]Record)
	Watch(func(Record))
	Get(key string) (Record, bool)
}

var _ registrations = (*Table)(nil)
