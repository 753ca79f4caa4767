package cluster

import (
	"bytes"
	"testing"
	"time"

	"github.com/baremesh/baremesh/core/testkit"
)

// TestSharedValues: a value published on one replica, too big for a
// gossip packet (a CA bundle), reaches the others within seconds and a
// replica that joins later; an older version does not replace it; the
// same version from two replicas resolves the same way everywhere; the
// push-pull state keeps the previous release's format.
func TestSharedValues(t *testing.T) {
	n := three(t)
	a, b, c := n.nodes["a"], n.nodes["b"], n.nodes["c"]
	big := bytes.Repeat([]byte("ca-bundle "), 400) // 4 KB
	if !a.Publish("ca", 2, big) {
		t.Fatal("first publish refused")
	}
	for _, nd := range []*node{b, c} {
		testkit.EventuallyWithin(t, 3*time.Second, nd.Name()+" holds the shared value", func() bool {
			s, ok := nd.SharedValue("ca")
			return ok && bytes.Equal(s.Value, big) && s.Origin == "a"
		})
	}
	if c.Publish("ca", 1, []byte("older")) {
		t.Error("an older version replaced the shared value")
	}
	b.Publish("tok/x", 1, []byte("from b"))
	c.Publish("tok/x", 1, []byte("from c"))
	d := n.start("d", "a")
	for _, nd := range []*node{a, b, c, d} {
		testkit.Eventually(t, nd.Name()+" to agree on tok/x and hold ca", func() bool {
			s, ok := nd.SharedValue("tok/x")
			ca, _ := nd.SharedValue("ca")
			return ok && string(s.Value) == "from c" && bytes.Equal(ca.Value, big)
		})
	}
	if got := d.SharedValues("tok/"); len(got) != 1 || got[0].Key != "tok/x" {
		t.Errorf("d's tok/ values: %+v", got)
	}
	// Push-pull stays in the previous release's format (records only), so
	// a replica of that release keeps its anti-entropy in a mixed cluster.
	if st := (delegate{a.Table}).LocalState(false); st[0] != msgState {
		t.Errorf("push-pull state is of kind %d, want %d (the previous release's)", st[0], msgState)
	}
}
