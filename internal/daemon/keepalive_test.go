package daemon

import (
	"context"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"

	"github.com/baremesh/baremesh/xdsserver/xdstype"
)

// TestPingingClientKeepsItsStream (issue #11 item 8): a client that
// sends keepalive pings every 10 s — grpc-go's smallest interval, which
// load generators and some proxies use — while the server has nothing to
// send keeps its stream. With grpc-go's default enforcement (pings no
// closer than 5 minutes) the server answered the third such ping with a
// GOAWAY "too_many_pings" and every stream on the connection ended
// mid-fleet (100 at a time with 100 streams per connection) with no
// reason of ours: this test then failed after ~30 s. It watches for
// 45 s (the observation is the test; nothing is synchronised by it).
func TestPingingClientKeepsItsStream(t *testing.T) {
	if testing.Short() {
		t.Skip("watches a stream for 45 s")
	}
	t.Parallel()
	d, _ := startDaemon(t, webConfDir(t, "80"))
	waitReady(t, d)

	conn, err := grpc.NewClient(d.XDSAddr(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 10 * time.Second, Timeout: 5 * time.Second, PermitWithoutStream: true}))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream, err := discovery.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	first := &discovery.DiscoveryRequest{TypeUrl: xdstype.Cluster.URL,
		Node: &corev3.Node{Id: "sidecar~10.0.0.9~pinger.test~test.svc.cluster.local"}}
	if err := stream.Send(first); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatalf("first response: %v", err)
	}
	ack := &discovery.DiscoveryRequest{TypeUrl: resp.TypeUrl, VersionInfo: resp.VersionInfo, ResponseNonce: resp.Nonce}
	if err := stream.Send(ack); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	ended := make(chan error, 1)
	go func() {
		for {
			if _, err := stream.Recv(); err != nil {
				ended <- err
				return
			}
		}
	}()
	select {
	case err := <-ended:
		t.Fatalf("the stream of a client pinging every 10 s ended after %v: %v", time.Since(start).Round(time.Second), err)
	case <-time.After(45 * time.Second):
	}
	_, metrics := get(t, "http://"+d.HTTPAddr()+"/metrics")
	for _, l := range strings.Split(grep(metrics, "baremesh_xds_stream_ends_total{"), "\n") {
		if l != "" && !strings.HasSuffix(l, " 0") { // every reason is exposed, at 0 until it happens
			t.Fatalf("streams ended while the client pinged:\n%s", l)
		}
	}
}
