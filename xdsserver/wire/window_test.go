package wire

import (
	"context"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// A server with GRPCServerOptions does not ping a connection for reading
// its requests (gRPC's bandwidth estimation is off), and a request larger
// than its receive window still arrives whole. The client is grpc-go over
// a connection whose incoming bytes are also parsed as HTTP/2 frames, so
// the test sees every frame the server wrote.
func TestServerDoesNotPingForRequests(t *testing.T) {
	const requests = 50
	got := make(chan int, requests+1) // the size of each request the server read
	srv := grpc.NewServer(append(GRPCServerOptions(), grpc.UnknownServiceHandler(func(_ any, stream grpc.ServerStream) error {
		for range requests + 1 {
			var r Request
			if err := stream.RecvMsg(&r); err != nil {
				return err
			}
			got <- len(r.GetVersionInfo())
		}
		// The last frames the server writes: a ping it sent for the
		// requests would come before them.
		return stream.SendMsg(SotWMsg("done", "t", "n", nil, nil))
	}))...)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()

	frames := &frameLog{}
	dial := func(ctx context.Context, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		pr, pw := io.Pipe()
		go frames.read(pr)
		return &teeConn{Conn: c, w: pw}, nil
	}
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(dial))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream, err := cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, "/test.Window/Stream")
	if err != nil {
		t.Fatal(err)
	}
	// Requests the size of ACKs, each read before the next is sent (each
	// one a burst of its own), then one three times the window.
	for i := range requests + 1 {
		size := 2 << 10
		if i == requests {
			size = 3 * receiveWindow
		}
		if err := stream.SendMsg(&discovery.DiscoveryRequest{VersionInfo: strings.Repeat("v", size)}); err != nil {
			t.Fatal(err)
		}
		select {
		case n := <-got:
			if n != size {
				t.Fatalf("request %d: the server read %d bytes of version, sent %d", i, n, size)
			}
		case <-ctx.Done():
			t.Fatalf("request %d of %d bytes never reached the server", i, size)
		}
	}
	var resp discovery.DiscoveryResponse
	if err := stream.RecvMsg(&resp); err != nil || resp.GetVersionInfo() != "done" {
		t.Fatalf("last response: %v %v", resp.GetVersionInfo(), err)
	}
	// The frame log has parsed what the client read, up to the
	// response's DATA frame.
	for frames.data() == 0 {
		if ctx.Err() != nil {
			t.Fatal("the frame log never saw the response")
		}
		time.Sleep(time.Millisecond) // polling the frame log's progress
	}
	if n := frames.pings(); n != 0 {
		t.Fatalf("the server sent %d pings while reading %d requests: bandwidth estimation is on", n, requests+1)
	}
}

// teeConn copies what is read from the connection to w.
type teeConn struct {
	net.Conn
	w *io.PipeWriter
}

func (c *teeConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		_, _ = c.w.Write(p[:n])
	}
	if err != nil {
		c.w.CloseWithError(err)
	}
	return n, err
}

// frameLog counts the server's frames: pings that are not answers, and
// DATA frames.
type frameLog struct {
	mu             sync.Mutex
	nPings, nDatas int
}

func (l *frameLog) read(r io.Reader) {
	fr := http2.NewFramer(io.Discard, r)
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			_, _ = io.Copy(io.Discard, r) // never block the connection's reader
			return
		}
		l.mu.Lock()
		switch f := f.(type) {
		case *http2.PingFrame:
			if !f.IsAck() {
				l.nPings++
			}
		case *http2.DataFrame:
			l.nDatas++
		}
		l.mu.Unlock()
	}
}

func (l *frameLog) pings() int { l.mu.Lock(); defer l.mu.Unlock(); return l.nPings }
func (l *frameLog) data() int  { l.mu.Lock(); defer l.mu.Unlock(); return l.nDatas }
