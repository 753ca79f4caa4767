package tlsport

import (
	"bufio"
	"crypto/tls"
	"encoding/binary"
	"net"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc/credentials"
)

// ServerCredentials is gRPC's TLS credentials for cfg with two changes
// beneath TLS that make a connect storm cheaper for the server, where a
// new proxy's whole config (often megabytes) crosses a fresh connection:
//
//   - gRPC hands TLS up to its write buffer at a time (32 KB for xDS),
//     which crypto/tls cuts into 16 KB records and writes one system
//     call per record; here the records of one write leave in one
//     system call, as plaintext gRPC's do.
//   - crypto/tls reads whatever the socket holds into its record buffer
//     and, when a record straddles the end, reallocates it (doubling,
//     zeroed); a proxy's large requests (SotW EDS names lists) made that
//     a tenth of the server's CPU in a storm. Here a read never crosses
//     a record's end, so the buffer is drained and reused.
//
// The bytes on the wire are exactly crypto/tls's.
func ServerCredentials(cfg *tls.Config) credentials.TransportCredentials {
	return batchedTLS{credentials.NewTLS(cfg)}
}

type batchedTLS struct {
	credentials.TransportCredentials
}

func (t batchedTLS) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	rc := &recordConn{Conn: raw, r: bufio.NewReaderSize(raw, 4096)}
	conn, info, err := t.TransportCredentials.ServerHandshake(rc)
	if err != nil {
		return nil, nil, err
	}
	return &batchWriter{Conn: conn, raw: rc}, info, nil
}

func (t batchedTLS) Clone() credentials.TransportCredentials {
	return batchedTLS{t.TransportCredentials.Clone()}
}

// recordConn is the raw connection beneath TLS: reads stop at record
// ends, and writes are gathered while a batch is open.
type recordConn struct {
	net.Conn
	r    *bufio.Reader
	left int // bytes of the current record not yet read

	mu    sync.Mutex
	batch *[]byte // nil: no batch open
}

const recordHeaderLen = 5

func (c *recordConn) Read(p []byte) (int, error) {
	if c.left == 0 {
		h, err := c.r.Peek(recordHeaderLen)
		if err != nil {
			if len(h) > 0 { // a short tail before EOF: TLS reports it
				return c.r.Read(p)
			}
			return 0, err
		}
		c.left = recordHeaderLen + int(binary.BigEndian.Uint16(h[3:5]))
	}
	if len(p) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= n
	return n, err
}

func (c *recordConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	if c.batch != nil {
		*c.batch = append(*c.batch, p...)
		c.mu.Unlock()
		return len(p), nil
	}
	defer c.mu.Unlock() // a write waits for a batch being flushed: records stay in order
	return c.Conn.Write(p)
}

// open starts a batch for a write of n plaintext bytes.
func (c *recordConn) open(n int) {
	need := n + (n/maxRecord+1)*recordOverhead
	var b *[]byte
	switch {
	case need <= smallBatch:
		b = smallPool.Get().(*[]byte)
	case need <= batchSize:
		b = batchPool.Get().(*[]byte)
	default:
		nb := make([]byte, 0, need)
		b = &nb
	}
	c.mu.Lock()
	c.batch = b
	c.mu.Unlock()
}

// maxRecord is TLS's largest record payload; recordOverhead bounds what
// TLS adds to a record: header, content type and AEAD tag (TLS 1.3), or
// header, explicit nonce and tag (1.2).
const (
	maxRecord      = 16 << 10
	recordOverhead = 64
)

// flush writes the gathered records and closes the batch. Records TLS
// writes from other goroutines (alerts) meanwhile joined the batch in
// TLS's own order, or wait for the flush.
func (c *recordConn) flush() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.batch
	c.batch = nil
	_, err := c.Conn.Write(*b)
	*b = (*b)[:0]
	switch cap(*b) {
	case smallBatch:
		smallPool.Put(b)
	case batchSize:
		batchPool.Put(b)
	}
	return err
}

// batchSize fits the records of gRPC's largest write here (the xDS
// server's 32 KB write buffer, xdsserver/wire), smallBatch one record (a
// small response, an ACK-sized write, a ping); only writes in flight
// hold one, and a larger write gets a batch of its own size.
const (
	batchSize  = 32<<10 + 3*recordOverhead
	smallBatch = maxRecord + 2*recordOverhead
)

var (
	batchPool = sync.Pool{New: func() any { b := make([]byte, 0, batchSize); return &b }}
	smallPool = sync.Pool{New: func() any { b := make([]byte, 0, smallBatch); return &b }}
)

// batchWriter is the TLS connection gRPC sees: each Write's records
// leave in one system call. gRPC writes from one goroutine; wmu keeps
// that an invariant rather than an assumption.
type batchWriter struct {
	net.Conn // the TLS connection
	raw      *recordConn
	wmu      sync.Mutex
	writing  atomic.Bool
}

func (w *batchWriter) Write(p []byte) (int, error) {
	w.wmu.Lock()
	defer w.wmu.Unlock()
	w.writing.Store(true)
	defer w.writing.Store(false)
	w.raw.open(len(p))
	n, err := w.Conn.Write(p)
	if ferr := w.raw.flush(); ferr != nil && err == nil {
		return 0, ferr
	}
	return n, err
}

// Close during a write breaks the write, as crypto/tls's own Close does
// when a Write is in flight (its close alert would wait for the write).
func (w *batchWriter) Close() error {
	if w.writing.Load() {
		w.raw.Conn.Close()
	}
	return w.Conn.Close()
}
