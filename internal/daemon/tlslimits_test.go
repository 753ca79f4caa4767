package daemon

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
)

// h2Caller opens raw gRPC calls on the TLS port over one HTTP/2
// connection, as an attacker would: headers, then a message prefix that
// announces a large message, and no more. (A gRPC client would have to
// build the whole message in this process.)
type h2Caller struct {
	t    *testing.T
	conn *tls.Conn
	fr   *http2.Framer
	wmu  sync.Mutex
	mu   sync.Mutex
	cond *sync.Cond
	st   map[uint32]string // grpc-status by stream ("reset" for RST_STREAM)
	next uint32
	// Flow control: what the server lets us send, on the connection and
	// per stream.
	connWin, initWin int64
	win              map[uint32]int64
}

func dialH2(t *testing.T, addr, rootFile string) *h2Caller {
	t.Helper()
	root, err := os.ReadFile(rootFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(root)
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := io.WriteString(conn, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	c := &h2Caller{t: t, conn: conn, fr: http2.NewFramer(conn, conn), st: map[uint32]string{}, next: 1,
		connWin: 65535, initWin: 65535, win: map[uint32]int64{}}
	c.cond = sync.NewCond(&c.mu)
	if err := c.fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	go c.read()
	return c
}

func (c *h2Caller) read() {
	dec := hpack.NewDecoder(4096, nil)
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			return
		}
		c.wmu.Lock()
		c.mu.Lock()
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if v, ok := f.Value(http2.SettingInitialWindowSize); ok {
				for id := range c.win {
					c.win[id] += int64(v) - c.initWin
				}
				c.initWin = int64(v)
			}
		case *http2.WindowUpdateFrame:
			if f.StreamID == 0 {
				c.connWin += int64(f.Increment)
			} else {
				c.win[f.StreamID] += int64(f.Increment)
			}
		case *http2.RSTStreamFrame:
			if c.st[f.StreamID] == "" {
				c.st[f.StreamID] = "reset"
			}
		}
		c.cond.Broadcast()
		c.mu.Unlock()
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = c.fr.WriteSettingsAck()
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				_ = c.fr.WritePing(true, f.Data)
			}
		case *http2.HeadersFrame:
			fields, _ := dec.DecodeFull(f.HeaderBlockFragment())
			for _, h := range fields {
				if h.Name == "grpc-status" {
					c.mu.Lock()
					c.st[f.StreamID] = h.Value
					c.cond.Broadcast()
					c.mu.Unlock()
				}
			}
		}
		c.wmu.Unlock()
	}
}

// call starts a CreateCertificate call announcing a message of size
// bytes and sends it, as fast as the server's flow control lets it,
// until the server answers or resets the stream.
func (c *h2Caller) call(size uint32) uint32 {
	c.t.Helper()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "https"}, {":path", "/istio.v1.auth.IstioCertificateService/CreateCertificate"},
		{":authority", "127.0.0.1"}, {"content-type", "application/grpc"}, {"te", "trailers"}} {
		_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	c.wmu.Lock()
	id := c.next
	c.next += 2
	c.mu.Lock()
	c.win[id] = c.initWin
	c.mu.Unlock()
	err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndHeaders: true})
	c.wmu.Unlock()
	if err != nil {
		c.t.Fatal(err)
	}
	go func() {
		chunk := make([]byte, 16<<10)
		prefix := make([]byte, 5)
		binary.BigEndian.PutUint32(prefix[1:], size)
		left := int64(size) + 5
		for left > 0 {
			c.mu.Lock()
			for c.st[id] == "" && (c.connWin <= 0 || c.win[id] <= 0) {
				c.cond.Wait()
			}
			if c.st[id] != "" {
				c.mu.Unlock()
				return
			}
			n := min(int64(len(chunk)), left, c.connWin, c.win[id])
			c.connWin -= n
			c.win[id] -= n
			c.mu.Unlock()
			p := chunk[:n]
			if left == int64(size)+5 {
				copy(p, prefix)
			}
			c.wmu.Lock()
			err := c.fr.WriteData(id, false, p)
			c.wmu.Unlock()
			if err != nil {
				return
			}
			left -= n
		}
	}()
	return id
}

func (c *h2Caller) status(id uint32) (codes.Code, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v := c.st[id]
	n, err := strconv.Atoi(v)
	if err != nil {
		n = -1
	}
	return codes.Code(n), v != ""
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// TestTLSPortBoundsUnauthenticatedMessages (issue #24): an
// unauthenticated caller sending a 15 MiB certificate request, 20 times
// at once, is refused before the request is read: the daemon's
// heap does not grow by the messages (before: gRPC read each request, up
// to the port's 16 MiB limit, before the CA saw the caller: 20 × 15 MiB).
// The repeated failures throttle the peer (baremesh_tls_peers_throttled_total),
// whose further calls are refused as throttled.
func TestTLSPortBoundsUnauthenticatedMessages(t *testing.T) {
	cfg := identityConfig(t)
	cfg.TLSSANs = []string{"127.0.0.1"}
	d := runDaemon(t, cfg)
	c := dialH2(t, d.TLSAddr(), filepath.Join(cfg.StateDir, "ca", "root-cert.pem"))
	before := heapInUse()
	const calls, size = 20, 15 << 20
	var ids []uint32
	for range calls {
		ids = append(ids, c.call(size))
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		done := 0
		for _, id := range ids {
			if _, ok := c.status(id); ok {
				done++
			}
		}
		if done == calls {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d unauthenticated calls answered after 10 s; heap grew by %d MiB (the messages are %d MiB)",
				done, calls, (int64(heapInUse())-int64(before))>>20, calls*size>>20)
		}
		time.Sleep(10 * time.Millisecond)
	}
	grew := int64(heapInUse()) - int64(before)
	t.Logf("heap in use grew by %.1f MiB for %d refused calls of %d MiB", float64(grew)/(1<<20), calls, size>>20)
	if grew > 32<<20 {
		t.Errorf("heap grew by %d MiB for %d refused calls", grew>>20, calls)
	}
	var unauth, throttled int
	for _, id := range ids {
		switch code, _ := c.status(id); code {
		case codes.Unauthenticated:
			unauth++
		case codes.ResourceExhausted:
			throttled++
		default:
			t.Errorf("call %d: %v, want Unauthenticated or ResourceExhausted (throttled)", id, code)
		}
	}
	// Calls checked concurrently with the 11th failure may still fail
	// authentication rather than be throttled.
	if unauth < 11 || throttled < 1 || unauth+throttled != calls {
		t.Errorf("%d Unauthenticated, %d throttled: want 11 failures (10 allowed a minute) then throttled", unauth, throttled)
	}
	resp, err := http.Get("http://" + d.HTTPAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, want := range []string{"baremesh_tls_peers_throttled_total 1", fmt.Sprintf(`baremesh_ca_requests_refused_total{reason="throttled"} %d`, throttled)} {
		if !strings.Contains(string(b), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}
