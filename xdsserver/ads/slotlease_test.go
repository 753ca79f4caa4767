package ads

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/baremesh/baremesh/core/push"
	"github.com/baremesh/baremesh/core/testkit"
)

// TestStalledSendLendsItsSlot (issue #30): while a reading proxy waits
// for a send slot, a send stalled on a proxy that does not read gives
// its slot up after a lease (a tenth of SlowSend), not after the whole
// SlowSend. Before, 100 streams that never read took the 64 slots with
// their first responses, and the next push to a reading proxy waited
// SlowSend (1 s) for one. Here one slot and a long SlowSend: the reading
// proxy must be served while the stalled send is not yet slow.
func TestStalledSendLendsItsSlot(t *testing.T) {
	reg := prometheus.NewRegistry()
	const slowSend = 20 * time.Second // the lease is 2 s
	srv, addr := flowEnv(t, Options{Registerer: reg, MaxConcurrentSends: 1, SlowSend: slowSend, SendTimeout: -1})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	openLDS(t, ctx, stalledClient(t, addr), 1)
	testkit.EventuallyWithin(t, 10*time.Second, "the stalled proxy connects", func() bool { return srv.Connected() == 1 })
	// A send lasts until gRPC has written the response (wire.Msg.Written),
	// so the stalled proxy's response, larger than its window, holds the
	// one slot and is not counted as pushed.
	srv.OnPush(nil, &push.Request{Full: true})
	testkit.EventuallyWithin(t, 30*time.Second, "the stalled send holds the slot", func() bool {
		return len(srv.sendSem) == 1
	})
	if n := testutil.ToFloat64(srv.metrics.pushes.WithLabelValues("lds")); n != 0 {
		t.Fatalf("%v LDS responses counted as sent to a proxy that has read none", n)
	}

	reader := openLDS(t, ctx, stalledClient(t, addr), 2)
	rx := pump(reader.Recv)
	select {
	case r, ok := <-rx:
		if !ok {
			t.Fatal("the reading proxy's stream closed")
		}
		if len(r.GetResources()) != flowListeners {
			t.Fatalf("reading proxy got %d listeners", len(r.GetResources()))
		}
	case <-time.After(2 * slowSend):
		t.Fatal("the reading proxy got nothing")
	}
	if n := testutil.ToFloat64(srv.metrics.slowSends); n != 0 {
		t.Errorf("the reading proxy was served only after the stalled send passed SlowSend (%v slow sends): the stalled send kept its slot", n)
	}
}
