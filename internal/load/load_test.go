package load

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func TestSotW(t *testing.T) { testFleet(t, SotW) }

// TestDelta runs the same scenario over Delta xDS. A server that answers
// Delta with Unimplemented fails it: baremeshd serves Delta, so a
// regression must not show as a skip.
func TestDelta(t *testing.T) { testFleet(t, Delta) }

// testFleet: 20 proxies get configured, then follow an endpoint edit, a
// new service and a removed service, each ACKed by all of them.
func testFleet(t *testing.T, mode Mode) {
	addr, dir := startDaemon(t, 5)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := Probe(ctx, addr, mode); err != nil {
		t.Fatalf("probe %s xDS: %v", mode, err)
	}
	f, err := Start(ctx, Options{Addr: addr, Proxies: 20, Mode: mode, StreamsPerConn: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Stop()
	if f.Conns() != 3 {
		t.Errorf("conns = %d, want 3 (20 streams, 8 per connection)", f.Conns())
	}
	lat, err := f.WaitConfigured(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s configured: %v", mode, lat.Percentiles())
	v := f.View(0)
	for _, c := range []string{cluster80(svcName(0)), "outbound|7070||" + host(svcName(4))} {
		if v.Cluster(c) == nil {
			t.Fatalf("cluster %s missing; have %v", c, v.Set(Cluster).Names())
		}
		if v.Endpoints(c) == nil {
			t.Fatalf("endpoints of %s missing; have %v", c, v.Set(Endpoint).Names())
		}
	}
	if !HasEndpoint(cluster80(svcName(2)), svcAddrs(2)[3])(v) {
		t.Fatalf("endpoint %s of %s missing: %v", svcAddrs(2)[3], svcName(2), v.Endpoints(cluster80(svcName(2))))
	}
	if v.Set(Listener).Len() == 0 || v.Set(Route).Len() == 0 {
		t.Fatalf("listeners %v routes %v", v.Set(Listener).Names(), v.Set(Route).Names())
	}
	// Proxies with the same config share it.
	if w := f.View(19); w.Set(Cluster) != v.Set(Cluster) || w.Set(Endpoint) != v.Set(Endpoint) {
		t.Errorf("proxies 0 and 19 hold equal config in different sets")
	}

	step := func(what string, p Predicate, change func()) {
		t.Helper()
		w := f.Expect(p)
		if w.Remaining() == 0 {
			t.Fatalf("%s: every proxy satisfies the predicate before the change", what)
		}
		start := time.Now()
		change()
		if err := w.Wait(ctx); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		t.Logf("%s %s: %v", mode, what, w.Latencies(start).Percentiles())
	}

	addrs := svcAddrs(1)
	addrs[0] = "10.250.0.1"
	step("endpoint edit", HasEndpoint(cluster80(svcName(1)), "10.250.0.1"), func() {
		writeFile(t, dir, svcName(1)+".yaml", serviceEntry(svcName(1), addrs...))
	})
	if HasEndpoint(cluster80(svcName(1)), svcAddrs(1)[0])(f.View(7)) {
		t.Errorf("the replaced endpoint is still there")
	}

	n := svcName(100)
	step("new service", All(
		func(v View) bool { return v.Cluster(cluster80(n)) != nil },
		HasEndpoint(cluster80(n), svcAddrs(100)[2]),
		HasRouteDomain(host(n)),
	), func() {
		writeFile(t, dir, n+".yaml", serviceEntry(n, svcAddrs(100)...))
	})

	step("removed service", func(v View) bool {
		return v.Cluster(cluster80(svcName(3))) == nil && v.Endpoints(cluster80(svcName(3))) == nil
	}, func() {
		if err := os.Remove(filepath.Join(dir, svcName(3)+".yaml")); err != nil {
			t.Fatal(err)
		}
	})

	tot := f.Totals()
	if tot.Nacks != 0 {
		t.Errorf("%d NACKs", tot.Nacks)
	}
	for _, typ := range Types {
		if tot.Responses[typ] < 20 || tot.Bytes[typ] == 0 {
			t.Errorf("%s: %d responses, %d bytes", typ, tot.Responses[typ], tot.Bytes[typ])
		}
	}
	for _, r := range f.Records() {
		if r.Connected.IsZero() || r.Configured.Before(r.Connected) || r.LastAck[Endpoint].Before(r.FirstRecv[Endpoint]) {
			t.Errorf("%s: inconsistent record %+v", r.ID, r)
		}
	}
	if err := f.Err(); err != nil {
		t.Error(err)
	}
}

func TestDiff(t *testing.T) {
	add, del := diff([]string{"a", "c", "d"}, []string{"b", "c", "e"})
	if !slices.Equal(add, []string{"b", "e"}) || !slices.Equal(del, []string{"a", "d"}) {
		t.Fatalf("add %v del %v", add, del)
	}
}

func TestPercentiles(t *testing.T) {
	var l Latencies
	for i := 1; i <= 100; i++ {
		l = append(l, time.Duration(i)*time.Millisecond)
	}
	s := l.Percentiles()
	if s.N != 100 || s.P50 != 50*time.Millisecond || s.P90 != 90*time.Millisecond || s.P99 != 99*time.Millisecond || s.Max != 100*time.Millisecond {
		t.Fatalf("%+v", s)
	}
	if (Latencies{}).Percentiles() != (Summary{}) {
		t.Fatal("empty")
	}
}
