package cluster

import (
	"bytes"
	"testing"
	"time"

	"github.com/baremesh/baremesh/core/testkit"
)

// TestUpdateDuringPartition: a, holding a proxy's connection, is cut off
// from b and c; b marks a's entry disconnected (its owner is gone) and,
// on a's side, the proxy reports a change (a health update: a new
// version of the same claim). Both changes are the claim's next version.
// After the heal every replica must hold the entry connected, owned by a,
// with the new data. Before, the two versions tied (same claim, same
// sequence number, neither a tombstone), so each replica kept the one it
// had: b and c kept the entry disconnected, for good, since its owner was
// alive again and nobody removes a live member's entry.
func TestUpdateDuringPartition(t *testing.T) {
	n := newNetwork(t, 5*time.Second) // longer than the partition: no tombstone
	n.start("a")
	n.start("b", "a")
	n.start("c", "a")
	n.waitMembers(3, all...)
	a, b := n.nodes["a"], n.nodes["b"]
	const k = "ns/updated-in-partition"
	a.Claim(k, data("1"))
	owned(t, n, k, "a", true, all...)

	n.partition([]string{"a"}, []string{"b", "c"}, true)
	n.waitMembers(2, "b", "c")
	owned(t, n, k, "a", false, "b", "c") // b's orphan mark
	if !a.Update(k, data("2")) {
		t.Fatal("a does not own the connected entry")
	}
	ra, _ := a.Get(k)
	rb, _ := b.Get(k)
	if ra.Seq != rb.Seq {
		t.Logf("a's update is version %d, b's mark %d: no tie made", ra.Seq, rb.Seq)
	}
	n.partition([]string{"a"}, []string{"b", "c"}, false)
	n.waitMembers(3, all...)
	for _, name := range all {
		nd := n.nodes[name]
		testkit.Eventually(t, name+": "+k+" connected, owned by a, with a's update", func() bool {
			r, ok := nd.Get(k)
			return ok && r.Owner == "a" && r.Connected() && bytes.Equal(r.Data, data("2"))
		})
	}
}
