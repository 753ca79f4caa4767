package wire

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/baremesh/baremesh/xdsserver/gen"
)

// Written closes only once gRPC has written the whole response, not when
// SendMsg returns: over a real gRPC connection to a client that has not
// read yet (a 64 KB window against a ~1.5 MB response), SendMsg returns
// at once and Written stays open; when the client reads, it closes. A
// response dropped by a stream's end closes it too.
func TestWrittenWaitsForTheWriter(t *testing.T) {
	const typeURL = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
	var res []gen.Resource
	for i := range 3000 {
		name := strconv.Itoa(i) + strings.Repeat("x", 400)
		res = append(res, gen.Resource{Name: name, Resource: &clusterv3.Cluster{Name: name}})
	}
	enc, err := Encode(typeURL, res, NewInterner())
	if err != nil {
		t.Fatal(err)
	}

	sends := make(chan *Msg)
	results := make(chan (<-chan struct{}))
	srv := grpc.NewServer(append(GRPCServerOptions(), grpc.UnknownServiceHandler(func(_ any, stream grpc.ServerStream) error {
		for m := range sends {
			w := m.Written()
			if err := stream.SendMsg(m); err != nil {
				return err
			}
			results <- w
		}
		return nil
	}))...)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()

	// A fixed 64 KB window (no BDP growth): the client takes no more
	// until it reads.
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream, err := cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, "/test.Written/Stream")
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.SendMsg(&discovery.DiscoveryRequest{}); err != nil { // opens the stream at the server
		t.Fatal(err)
	}

	msg := SotWMsg("1", typeURL, "n1", enc, nil)
	sends <- msg
	written := <-results // SendMsg has returned
	if msg.Size() < 1<<20 {
		t.Fatalf("response of %d bytes: too small for the test", msg.Size())
	}
	select {
	case <-written:
		t.Fatal("Written closed while the client had taken only its window of the response")
	case <-time.After(300 * time.Millisecond): // a window in which it must not close; not a wait for a condition
	}
	var got discovery.DiscoveryResponse
	if err := stream.RecvMsg(&got); err != nil {
		t.Fatal(err)
	}
	if len(got.Resources) != len(enc) || got.Nonce != "n1" {
		t.Fatalf("client got %d resources, nonce %q", len(got.Resources), got.Nonce)
	}
	select {
	case <-written:
	case <-time.After(30 * time.Second):
		t.Fatal("Written still open after the client read the whole response")
	}

	// A second response, then the stream ends before the client reads:
	// gRPC drops it and Written closes.
	sends <- SotWMsg("2", typeURL, "n2", enc, nil)
	written = <-results
	cancel()
	select {
	case <-written:
	case <-time.After(30 * time.Second):
		t.Fatal("Written still open after the stream ended")
	}
	close(sends)
}
