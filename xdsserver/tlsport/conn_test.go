package tlsport

import (
	"bytes"
	"crypto/rand"
	"crypto/tls"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baremesh/baremesh/core/identity"
)

// countingConn counts the raw connection's writes and checks that no
// read returns bytes past a TLS record's end.
type countingConn struct {
	net.Conn
	writes atomic.Int64
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// tlsPair is a server connection through ServerCredentials (over a
// counting raw connection) and a crypto/tls client, on loopback TCP.
func tlsPair(t *testing.T) (srv net.Conn, raw *countingConn, cli *tls.Conn) {
	t.Helper()
	ca, err := identity.LoadCA(identity.CAOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ServerTLS(ca, []string{"istiod.istio-system.svc"})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	type accepted struct {
		c   net.Conn
		raw *countingConn
		err error
	}
	ch := make(chan accepted, 1)
	go func() {
		c, err := lis.Accept()
		if err != nil {
			ch <- accepted{err: err}
			return
		}
		raw := &countingConn{Conn: c}
		s, _, err := ServerCredentials(cfg).ServerHandshake(raw)
		ch <- accepted{s, raw, err}
	}()
	cli, err = tls.Dial("tcp", lis.Addr().String(), &tls.Config{RootCAs: ca.Roots(), ServerName: "istiod.istio-system.svc", NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	a := <-ch
	if a.err != nil {
		t.Fatal(a.err)
	}
	t.Cleanup(func() { cli.Close(); a.c.Close() })
	return a.c, a.raw, cli
}

// TestBatchedRecords: what the server writes arrives intact, a 32 KB
// write (gRPC's buffer) leaves in one system call instead of one per
// record (two or three), and what the client sends in records of every
// size — split across socket reads at random — arrives intact.
func TestBatchedRecords(t *testing.T) {
	srv, raw, cli := tlsPair(t)
	out := make([]byte, 1<<20)
	rand.Read(out)
	got := make(chan []byte, 1)
	go func() { b, _ := io.ReadAll(io.LimitReader(cli, int64(len(out)))); got <- b }()
	before := raw.writes.Load()
	for p := out; len(p) > 0; p = p[32<<10:] {
		if _, err := srv.Write(p[:32<<10]); err != nil {
			t.Fatal(err)
		}
	}
	if w := raw.writes.Load() - before; w != int64(len(out)/(32<<10)) {
		t.Errorf("%d system calls for %d writes of 32 KB, want one each", w, len(out)/(32<<10))
	}
	if b := <-got; !bytes.Equal(b, out) {
		t.Fatalf("client read %d bytes, not what the server wrote", len(b))
	}

	in := make([]byte, 3<<20)
	rand.Read(in)
	go func() {
		for p, n := in, 1; len(p) > 0; n = n*7%70000 + 1 { // records from 1 byte to 16 KB
			n = min(n, len(p))
			if _, err := cli.Write(p[:n]); err != nil {
				return
			}
			p = p[n:]
		}
	}()
	b, err := io.ReadAll(io.LimitReader(srv, int64(len(in))))
	if err != nil || !bytes.Equal(b, in) {
		t.Fatalf("server read %d bytes (%v), not what the client wrote", len(b), err)
	}
}

// TestCloseBreaksABlockedWrite: a peer that never reads must not keep
// Close waiting behind a batch stuck in the socket.
func TestCloseBreaksABlockedWrite(t *testing.T) {
	srv, raw, _ := tlsPair(t)
	done := make(chan error, 1)
	go func() {
		p := make([]byte, 32<<10)
		for {
			if _, err := srv.Write(p); err != nil {
				done <- err
				return
			}
		}
	}()
	// The client reads nothing, so the writes stop once the socket
	// buffers are full: poll until a write is in progress and the raw
	// write count has not moved for 200 ms.
	deadline := time.Now().Add(10 * time.Second)
	last, since := int64(-1), time.Now()
	for {
		if n := raw.writes.Load(); n != last {
			last, since = n, time.Now()
		} else if srv.(*batchWriter).writing.Load() && time.Since(since) > 200*time.Millisecond {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the writes never blocked")
		}
		time.Sleep(10 * time.Millisecond)
	}
	start := time.Now()
	if err := srv.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		t.Fatal("the blocked write did not end within 3 s of Close")
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("Close took %v with a write blocked", took)
	}
}
