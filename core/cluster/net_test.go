package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/baremesh/baremesh/core/testkit"
)

// network holds the test's replicas and the cuts between them. Each
// replica runs real memberlist over a real loopback NetTransport, on its
// own port; cutTransport wraps it to drop what a replica sends to an
// address it is cut from (packets dropped as a lossy network would, stream
// dials refused), which is how a partition is made and healed. It also
// counts the bytes put on the wire (after memberlist's framing,
// compression and encryption).
type network struct {
	// tune, if set, adjusts memberlist after fast.
	tune func(*memberlist.Config)
	t    testing.TB
	// metrics, if set, are every replica's.
	metrics *Metrics
	mu      sync.Mutex
	cut     map[[2]string]bool // [from addr, to addr]
	// noUDP are addresses no UDP packet reaches (TCP does).
	noUDP map[string]bool
	nodes map[string]*node
	grace time.Duration
	// reap is every replica's ReapInterval (default 20 ms).
	reap time.Duration
	// skew, if set for a name, is how far that replica's wall clock is
	// off (a replica whose clock jumped: its stamps and disconnect times
	// are off by it; its own durations, within one process, are not).
	skew map[string]time.Duration
}

type node struct {
	*Table
	tr     *cutTransport
	events *eventLog
}

func newNetwork(t testing.TB, grace time.Duration) *network {
	return &network{t: t, cut: map[[2]string]bool{}, noUDP: map[string]bool{}, nodes: map[string]*node{}, grace: grace, reap: 20 * time.Millisecond}
}

// fast makes memberlist detect failures and gossip in tens of
// milliseconds instead of seconds.
//
// Not faster than this: with 100 ms probes, a 50 ms probe timeout and a
// suspicion multiplier of 2 (a member dead 200 ms after the first missed
// probe), replicas starved by a CPU hog under -race declared live ones dead,
// and the tests that make one race (TestOwnerMovesOnReconnect,
// TestPartitionHeals) saw entries orphaned and re-claimed.
func fast(c *memberlist.Config) {
	c.ProbeInterval = 200 * time.Millisecond
	c.ProbeTimeout = 100 * time.Millisecond
	c.SuspicionMult = 4
	c.GossipInterval = 20 * time.Millisecond
	c.PushPullInterval = 300 * time.Millisecond
	c.TCPTimeout = 500 * time.Millisecond
	c.GossipToTheDeadTime = time.Second
}

// start starts replica name, joined to seeds (names of running replicas).
func (n *network) start(name string, seeds ...string) *node {
	n.t.Helper()
	nt, err := memberlist.NewNetTransport(&memberlist.NetTransportConfig{BindAddrs: []string{"127.0.0.1"}, Logger: log.New(io.Discard, "", 0)})
	if err != nil {
		n.t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(nt.GetAutoBindPort()))
	tr := &cutTransport{NetTransport: nt, net: n, self: addr}
	var seedAddrs []string
	for _, s := range seeds {
		seedAddrs = append(seedAddrs, n.nodes[s].Addr())
	}
	ev := &eventLog{}
	now := time.Now
	if d := n.skew[name]; d != 0 {
		now = func() time.Time { return time.Now().Add(d) }
	}
	tbl, err := New(Options{Name: name, Now: now, Bind: addr, Logger: testLogger(name), Metrics: n.metrics, Seeds: seedAddrs, Grace: n.grace,
		ReapInterval: n.reap, Rejoin: 100 * time.Millisecond,
		SecretKey: []byte("0123456789abcdef"),
		Memberlist: func(c *memberlist.Config) {
			fast(c)
			if n.tune != nil {
				n.tune(c)
			}
			c.Transport = tr
		}})
	if err != nil {
		n.t.Fatal(err)
	}
	tbl.Watch(ev.add)
	nd := &node{Table: tbl, tr: tr, events: ev}
	n.mu.Lock()
	n.nodes[name] = nd
	n.mu.Unlock()
	n.t.Cleanup(func() { _ = tbl.Shutdown(false) })
	return nd
}

// partition cuts every replica in a from every one in b, both ways; heal
// undoes it.
func (n *network) partition(a, b []string, cut bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, x := range a {
		for _, y := range b {
			ax, ay := n.nodes[x].Addr(), n.nodes[y].Addr()
			n.cut[[2]string{ax, ay}], n.cut[[2]string{ay, ax}] = cut, cut
		}
	}
}

// cutOneWay drops what from sends to to.
func (n *network) cutOneWay(from, to string, cut bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.cut[[2]string{n.nodes[from].Addr(), n.nodes[to].Addr()}] = cut
}

// dropUDPTo drops every UDP packet sent to name (probes, acks, gossip),
// as a busy machine's full socket buffer would; streams still connect.
func (n *network) dropUDPTo(name string, drop bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.noUDP[n.nodes[name].Addr()] = drop
}

func (n *network) udpLost(to string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.noUDP[to]
}

func (n *network) isCut(from, to string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cut[[2]string{from, to}]
}

// waitMembers waits until each named replica sees exactly want members.
func (n *network) waitMembers(want int, names ...string) {
	n.t.Helper()
	for _, name := range names {
		nd := n.nodes[name]
		testkit.Eventually(n.t, fmt.Sprintf("%s to see %d members", name, want), func() bool { return nd.NumMembers() == want })
	}
}

type cutTransport struct {
	*memberlist.NetTransport
	net     *network
	self    string
	sent    atomic.Int64
	once    sync.Once
	streams chan net.Conn
	done    chan struct{}
}

// StreamCh hands memberlist the accepted streams wrapped to count what
// this side writes (the answer half of a push-pull).
func (c *cutTransport) StreamCh() <-chan net.Conn {
	c.once.Do(func() {
		c.streams, c.done = make(chan net.Conn), make(chan struct{})
		in := c.NetTransport.StreamCh()
		go func() {
			for {
				select {
				case conn := <-in:
					select {
					case c.streams <- &countConn{Conn: conn, n: &c.sent}:
					case <-c.done:
						conn.Close()
						return
					}
				case <-c.done:
					return
				}
			}
		}()
	})
	return c.streams
}

func (c *cutTransport) Shutdown() error {
	c.once.Do(func() { c.done = make(chan struct{}) })
	close(c.done)
	// The forwarder is gone, and NetTransport.Shutdown waits for its
	// accept loop, which may be blocked handing over a stream accepted
	// just now (its channel is unbuffered): drain and close those until
	// it returns. Without this a test's clean-up hung for 10 minutes
	// under load (TestBurstSpreadsFast, goroutine in tcpListen's send).
	stop := make(chan struct{})
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		in := c.NetTransport.StreamCh()
		for {
			select {
			case conn := <-in:
				conn.Close()
			case <-stop:
				return
			}
		}
	}()
	err := c.NetTransport.Shutdown()
	close(stop)
	<-drained
	return err
}

var errCut = errors.New("test: cut off")

func (c *cutTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	if c.net.isCut(c.self, addr) || c.net.udpLost(addr) {
		return time.Now(), nil // lost on the way
	}
	c.sent.Add(int64(len(b)))
	return c.NetTransport.WriteTo(b, addr)
}

func (c *cutTransport) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	return c.WriteTo(b, a.Addr)
}

func (c *cutTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	if c.net.isCut(c.self, addr) {
		return nil, errCut
	}
	conn, err := c.NetTransport.DialTimeout(addr, timeout)
	if err != nil {
		return nil, err
	}
	return &countConn{Conn: conn, n: &c.sent}, nil
}

func (c *cutTransport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	return c.DialTimeout(a.Addr, timeout)
}

// countConn counts what one side of a stream writes.
type countConn struct {
	net.Conn
	n *atomic.Int64
}

func (c *countConn) Write(b []byte) (int, error) {
	c.n.Add(int64(len(b)))
	return c.Conn.Write(b)
}

// eventLog records what the watcher was told, with arrival times.
type eventLog struct {
	mu  sync.Mutex
	evs []event
}

type event struct {
	Record
	at time.Time
}

func (l *eventLog) add(r Record) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.evs = append(l.evs, event{r, time.Now()})
}

// last is the last event for key.
func (l *eventLog) last(key string) (event, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := len(l.evs) - 1; i >= 0; i-- {
		if l.evs[i].Key == key {
			return l.evs[i], true
		}
	}
	return event{}, false
}

// removal waits until the watcher has been told of key's removal and
// returns that event. The table drops a record before its watcher runs
// (events go through a queue), so reading the log as soon as Get shows the
// record gone can miss the event (TestOneReplica failed so under load).
func (l *eventLog) removal(t *testing.T, key string) event {
	t.Helper()
	var ev event
	testkit.Eventually(t, "the watcher told of "+key+"'s removal", func() bool {
		e, ok := l.last(key)
		ev = e
		return ok && e.Deleted
	})
	return ev
}

func data(s string) json.RawMessage { return json.RawMessage(`{"address":"` + s + `"}`) }

func testLogger(name string) *slog.Logger {
	if os.Getenv("CLUSTER_LOG") == "" {
		return nil
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("replica", name)
}
