package daemon

import (
	"context"
	"errors"
	"testing"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/baremesh/baremesh/internal/daemonconfig"
)

// A client that opens xDS streams and never sends a request on them is
// held to twice maxStreamsPerConnection on a connection (the HTTP/2
// limit the daemon announces): past it, opening a stream waits until
// one of its streams ends. The cap itself counts only streams that have
// sent a request, so without the limit every silent stream cost the
// daemon two goroutines, without bound.
func TestSilentStreamsHeldToTheLimit(t *testing.T) {
	t.Parallel()
	d, _ := startDaemonWith(t, webConfDir(t, "80"), func(c *daemonconfig.Config) { c.MaxStreamsPerConnection = 3 })
	waitReady(t, d)
	conn, err := grpc.NewClient(d.XDSAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ads := discovery.NewAggregatedDiscoveryServiceClient(conn)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	var silent []context.CancelFunc
	for i := range 6 { // the limit: 2 × 3
		sctx, scancel := context.WithCancel(ctx)
		defer scancel()
		if _, err := ads.StreamAggregatedResources(sctx); err != nil {
			t.Fatalf("silent stream %d of the 6 the limit allows: %v", i+1, err)
		}
		silent = append(silent, scancel)
	}
	// A seventh waits for the limit: still waiting after a second.
	wctx, wcancel := context.WithTimeout(ctx, time.Second)
	defer wcancel()
	if _, err := ads.StreamAggregatedResources(wctx); status.Code(err) != codes.DeadlineExceeded && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a seventh silent stream on the connection: %v, want it to wait (deadline exceeded)", err)
	}
	// One ends: the next opens.
	silent[0]()
	octx, ocancel := context.WithTimeout(ctx, 10*time.Second)
	defer ocancel()
	if _, err := ads.StreamAggregatedResources(octx); err != nil {
		t.Fatalf("a stream after one of the six ended: %v", err)
	}
}
