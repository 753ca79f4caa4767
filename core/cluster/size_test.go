package cluster

import (
	"encoding/json"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/baremesh/baremesh/core/testkit"
)

// payload is what core/workloads puts in a record: its entry without the
// built WorkloadEntry (every replica rebuilds that from the group).
func payload(i int) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"namespace":"vms","name":"web-10.1.%d.%d-net1","group":"web","address":"10.1.%d.%d","network":"net1",`+
		`"locality":"us-east/a","proxyLabels":{"app":"web","version":"v1"},"connectedAt":"2026-11-23T22:36:43.123456789Z","healthy":true}`,
		i/250, i%250, i/250, i%250))
}

const sizeN = 5000

// BenchmarkRegistrations5000 measures what a registration costs: heap in
// one replica's table, and gossip bytes to bring 5,000 registrations
// claimed at one replica to two others (real memberlist on loopback,
// encrypted, the test timers of net_test.go: push-pull every 300 ms).
//
//	go test -run - -bench Registrations5000 -benchtime 1x ./core/cluster/
func BenchmarkRegistrations5000(b *testing.B) {
	for range b.N {
		// Heap: a table of one, after a GC.
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		tbl, err := New(Options{Name: "solo"})
		if err != nil {
			b.Fatal(err)
		}
		for i := range sizeN {
			tbl.Claim(fmt.Sprintf("vms/web-10.1.%d.%d-net1", i/250, i%250), payload(i))
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/sizeN, "heap-B/reg")
		r, _ := tbl.Get("vms/web-10.1.0.1-net1")
		b.ReportMetric(float64(len(encodeRecord(r))), "record-B")
		runtime.KeepAlive(tbl)
		_ = tbl.Shutdown(false)

		// Gossip: three replicas.
		n := newNetwork(b, time.Minute)
		reg := prometheus.NewRegistry()
		n.metrics = NewMetrics(reg, func() int { return 0 })
		a := n.start("a")
		n.start("b", "a")
		n.start("c", "a")
		n.waitMembers(3, "a", "b", "c")
		var wire0 int64
		for _, nd := range n.nodes {
			wire0 += nd.tr.sent.Load()
		}
		start := time.Now()
		for i := range sizeN {
			a.Claim(fmt.Sprintf("vms/web-10.1.%d.%d-net1", i/250, i%250), payload(i))
		}
		for _, name := range []string{"b", "c"} {
			nd := n.nodes[name]
			testkit.EventuallyWithin(b, time.Minute, name+" to hold every registration", func() bool { return len(nd.Records()) == sizeN })
		}
		b.ReportMetric(time.Since(start).Seconds(), "s-to-replicate")
		var wire int64
		for _, nd := range n.nodes {
			wire += nd.tr.sent.Load()
		}
		b.ReportMetric(float64(wire-wire0)/sizeN, "wire-B/reg")
		b.ReportMetric(counter(b, reg, "sent", "broadcast")/sizeN, "bcast-payload-B/reg")
		b.ReportMetric(counter(b, reg, "sent", "pushpull")/sizeN, "pushpull-payload-B/reg")
		b.ReportMetric(float64(len(encodeState(a.Records())))/sizeN, "state-B/reg")
		// Idle: only anti-entropy (and probes) run; each of the three
		// starts a push-pull every 300 ms.
		var idle0 int64
		for _, nd := range n.nodes {
			idle0 += nd.tr.sent.Load()
		}
		from := time.Now()
		testkit.Eventually(b, "3 s to pass", func() bool { return time.Since(from) > 3*time.Second })
		var idle int64
		for _, nd := range n.nodes {
			idle += nd.tr.sent.Load()
		}
		b.ReportMetric(float64(idle-idle0)/time.Since(from).Seconds()/sizeN, "idle-wire-B/reg/s")
		for _, nd := range n.nodes {
			_ = nd.Shutdown(false)
		}
	}
}

// counter reads baremesh_cluster_gossip_bytes_total{direction,kind}.
func counter(t testing.TB, reg *prometheus.Registry, direction, kind string) float64 {
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "baremesh_cluster_gossip_bytes_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			if l["direction"] == direction && l["kind"] == kind {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// BenchmarkFailover500: 500 registrations spread over three replicas;
// one is killed (no leave). Reported: registrations lost on the survivors
// (target 0), time until the survivors see the death, and time from the
// proxies' reconnects (claims at the survivors, made at once here: a real
// proxy's reconnect delay adds to it) until every registration is owned
// by a live replica on both survivors.
//
//	go test -run - -bench Failover500 -benchtime 1x ./core/cluster/
func BenchmarkFailover500(b *testing.B) {
	const n500 = 500
	for range b.N {
		n := newNetwork(b, time.Minute)
		a := n.start("a")
		bb := n.start("b", "a")
		c := n.start("c", "a")
		n.waitMembers(3, "a", "b", "c")
		nodes := []*node{a, bb, c}
		key := func(i int) string { return fmt.Sprintf("vms/web-10.2.%d.%d", i/250, i%250) }
		for i := range n500 {
			nodes[i%3].Claim(key(i), payload(i))
		}
		for _, nd := range nodes {
			testkit.EventuallyWithin(b, time.Minute, nd.Name()+" to hold 500", func() bool { return len(nd.Records()) == n500 })
		}
		killed := time.Now()
		_ = a.Shutdown(false)
		n.waitMembers(2, "b", "c")
		b.ReportMetric(time.Since(killed).Seconds(), "s-to-detect")
		lost := 0
		for _, nd := range []*node{bb, c} {
			lost += n500 - len(nd.Records())
		}
		b.ReportMetric(float64(lost), "lost")
		reconnect := time.Now()
		for i := 0; i < n500; i += 3 { // a's proxies reconnect to b or c
			[]*node{bb, c}[i%2].Claim(key(i), payload(i))
		}
		for _, nd := range []*node{bb, c} {
			testkit.EventuallyWithin(b, time.Minute, nd.Name()+" to see every entry owned by a live replica", func() bool {
				rs := nd.Records()
				for _, r := range rs {
					if r.Owner == "a" || !r.Connected() {
						return false
					}
				}
				return len(rs) == n500
			})
		}
		b.ReportMetric(time.Since(reconnect).Seconds(), "s-to-reowned")
		for _, nd := range nodes {
			_ = nd.Shutdown(false)
		}
	}
}
