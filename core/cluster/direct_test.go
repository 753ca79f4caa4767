package cluster

import (
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/baremesh/baremesh/core/testkit"
)

// TestFewChangesReachEveryMember: a handful of changes (under the burst
// threshold) reach a member that no gossip packet reaches, long before
// the next push-pull (an hour here): they are also sent to every member
// over TCP (direct.go). Before, such a member waited for the push-pull
// (30 s by default) for every record its peers' gossip rounds happened
// not to send it (internal/daemon's TestTLSProxiesFailOver waited 30 s
// for one replica to hold 30 registrations made on another).
func TestFewChangesReachEveryMember(t *testing.T) {
	n := newNetwork(t, time.Minute)
	n.tune = func(c *memberlist.Config) {
		// memberlist's failure detection (probes every second, a TCP
		// ping when UDP gets no answer): c, which gets no UDP, stays a
		// member. Push-pull is out of the picture.
		d := memberlist.DefaultLANConfig()
		c.ProbeInterval, c.ProbeTimeout, c.SuspicionMult = d.ProbeInterval, d.ProbeTimeout, d.SuspicionMult
		c.TCPTimeout, c.GossipToTheDeadTime = d.TCPTimeout, d.GossipToTheDeadTime
		c.PushPullInterval = time.Hour
	}
	a := n.start("a")
	b := n.start("b", "a")
	c := n.start("c", "a")
	n.waitMembers(3, all...)
	n.dropUDPTo("c", true)

	const count = 10
	for i := range count {
		a.Claim(fmt.Sprintf("vms/few-%d", i), data(fmt.Sprint(i)))
	}
	b.Claim("vms/on-b", data("b"))
	a.Update("vms/few-0", data("updated"))
	a.Release("vms/few-1")
	want := func(nd *node) bool {
		if len(nd.Records()) != count+1 {
			return false
		}
		for i := range count {
			r, ok := nd.Get(fmt.Sprintf("vms/few-%d", i))
			if !ok || r.Owner != "a" || r.Connected() != (i != 1) {
				return false
			}
		}
		r, _ := nd.Get("vms/few-0")
		return string(r.Data) == string(data("updated"))
	}
	for _, nd := range []*node{a, b, c} {
		testkit.Eventually(t, nd.Name()+" holds every change", func() bool { return want(nd) })
	}
	if got := c.NumMembers(); got != 3 {
		t.Errorf("c sees %d members, want 3 (the test needs c to stay a member)", got)
	}
}
