package ads

import (
	"context"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/baremesh/baremesh/xdsserver/wire"
)

// Flow control toward proxies (issue #11, slow readers). A proxy that
// stops reading must cost the others nothing:
//
//   - A stream has at most one response in flight: its loop waits for the
//     send (until gRPC has written the response, not merely queued it),
//     and pushes arriving meanwhile merge into one pending request,
//     generated from the newest snapshot once the send is done. gRPC
//     queues one response beyond the flow-control window, so a stalled
//     stream holds at most one response's bytes (often shared buffers).
//   - The send slots (MaxConcurrentSends, which bound what a connect storm
//     holds) are lent, not given: a send that has not finished within
//     SlowSend gives its slot back and goes on waiting without one, and
//     while other sends wait for a slot, within a tenth of that
//     (slotLease).
//   - A send that makes no progress for SendTimeout (gRPC accepts a new
//     response only once the previous one has drained) ends the stream
//     with reason send_timeout; the proxy reconnects and gets its state
//     afresh. A slow proxy that keeps reading is never cut.
//   - MaxStreamsPerConnection and MaxStreamsPerPeer cap the streams one
//     connection and one peer address may open; a stream over a cap is
//     refused with ResourceExhausted, a log line and a metric. A stream
//     that sends no request within FirstRequestTimeout (not yet counted
//     by the caps) is ended with DeadlineExceeded and the metric.
//
// Generation never waits on a send: Build holds a generation slot only
// while it generates. A push wakes the connections a few at a time
// (fanout.go); a connection gives its turn back when it starts a send.

// Defaults of the flow settings.
const (
	DefaultSendTimeout             = 60 * time.Second
	DefaultSlowSend                = time.Second
	DefaultFirstRequestTimeout     = 60 * time.Second
	DefaultMaxStreamsPerConnection = 100
	DefaultMaxStreamsPerPeer       = 5000
)

// errSendTimeout ends a stream whose proxy does not read.
func errSendTimeout(d time.Duration) error {
	return status.Errorf(codes.DeadlineExceeded, "no response accepted for %v: the proxy is not reading", d)
}

// write sends m on the stream: on a goroutine of the send's own,
// holding a send slot for at most SlowSend (less when sends wait for a
// slot: see slotLease), giving up after SendTimeout.
func (c *conn) write(m *wire.Msg) error {
	s := c.s
	s.sends.Add(1)
	// A send ends the connection's turn of the push fan-out: waiting on
	// a proxy is not working out a push (fanout.go).
	c.sending.Store(true)
	defer c.sending.Store(false)
	c.endTurn(false)
	// A stream whose last send outlived SlowSend sends without a slot
	// until one of its sends is quick again: a stalled proxy never makes
	// a reading one wait.
	held := !c.slow
	if held {
		select {
		case s.sendSem <- struct{}{}:
		default:
			s.slotWaiters.Add(1)
			select {
			case s.sendSem <- struct{}{}:
				s.slotWaiters.Add(-1)
			case <-c.ctx.Done():
				s.slotWaiters.Add(-1)
				return context.Cause(c.ctx)
			}
		}
	}
	defer func() {
		if held {
			<-s.sendSem
		}
	}()
	if c.sent == nil {
		c.sent = make(chan error, 1)
		c.timer = time.NewTimer(time.Hour)
	}
	// The send runs on a goroutine of its own, which ends with it: a
	// sender goroutine kept per stream was a third of the daemon's
	// goroutines (2,000 proxies: 6,083 goroutines, 36 MB of stacks). At
	// most one runs per stream: the loop waits for its result, or ends
	// the stream, whose end makes the send return (sent has room for
	// that last result).
	//
	// The send is done when gRPC has written m, not when SendMsg has
	// queued it (wire.Msg.Written): the slot then bounds the connections
	// being written to, and with them the write buffers in use (issue
	// #30; README, "Replicas").
	written := m.Written()
	go func(ctx context.Context, sent chan<- error, send func(*wire.Msg) error) {
		err := send(m)
		if err == nil {
			select {
			case <-written:
			case <-ctx.Done():
				err = context.Cause(ctx)
			}
		}
		sent <- err
	}(c.ctx, c.sent, c.v.send)
	lease := slotLease(s.slowSend)
	for waited := time.Duration(0); waited < s.slowSend; waited += lease {
		c.timer.Reset(min(lease, s.slowSend-waited))
		select {
		case err := <-c.sent:
			c.timer.Stop()
			c.slow = false
			return err
		case <-c.timer.C:
		}
		if held && s.slotWaiters.Load() > 0 {
			// Another send waits for a slot: this one, unfinished after
			// a lease, is waiting on its proxy's flow control (or a CPU),
			// not writing; it goes on without its slot.
			<-s.sendSem
			held = false
		}
	}
	// Slow: give the slot back and wait on without one.
	if held {
		<-s.sendSem
		held = false
	}
	c.slow = true
	s.metrics.slowSends.Inc()
	if s.sendTimeout <= 0 {
		return <-c.sent // no timeout: the end of the stream fails the send
	}
	c.timer.Reset(max(s.sendTimeout-s.slowSend, 0))
	select {
	case err := <-c.sent:
		c.timer.Stop()
		return err
	case <-c.timer.C:
		s.metrics.sendTimeouts.Inc()
		return errSendTimeout(s.sendTimeout)
	}
}

// slotLease is how long a send keeps its slot while other sends wait
// for one: a tenth of SlowSend. Slots bound the sends that are writing;
// a send unfinished after a lease waits on flow control, and kept its
// slot for the whole SlowSend before (issue #30: 100 streams that never
// read took the 64 slots with their first responses, and the next push
// to a reading proxy waited a whole second for one).
func slotLease(slowSend time.Duration) time.Duration {
	return max(slowSend/10, time.Millisecond)
}

// stopSender stops the send timer; a send still under way returns once
// the stream has ended.
func (c *conn) stopSender() {
	if c.timer != nil {
		c.timer.Stop()
	}
}

// streamCaps counts open streams per connection and per peer address.
type streamCaps struct {
	perConn, perPeer int
	mu               sync.Mutex
	conns, peers     map[string]int
}

// admit counts a new stream from addr, or refuses it if a cap would be
// passed; release undoes an admission.
func (s *Server) admit(addr net.Addr) (release func(), err error) {
	if addr == nil {
		return func() {}, nil
	}
	conn := addr.String()
	host := conn
	if h, _, err := net.SplitHostPort(conn); err == nil {
		host = h
	}
	k := &s.caps
	k.mu.Lock()
	var reason string
	switch {
	case k.perConn > 0 && k.conns[conn] >= k.perConn:
		reason = "per_connection"
		err = status.Errorf(codes.ResourceExhausted, "this connection already has %d xDS streams (maxStreamsPerConnection)", k.conns[conn])
	case k.perPeer > 0 && k.peers[host] >= k.perPeer:
		reason = "per_peer"
		err = status.Errorf(codes.ResourceExhausted, "peer %s already has %d xDS streams (maxStreamsPerPeer)", host, k.peers[host])
	default:
		k.conns[conn]++
		k.peers[host]++
	}
	k.mu.Unlock()
	if err != nil {
		s.metrics.refused.WithLabelValues(reason).Inc()
		s.log.Warn("xDS stream refused: cap reached", "peer", conn, "cap", reason, "err", err)
		return nil, err
	}
	return func() {
		k.mu.Lock()
		defer k.mu.Unlock()
		if k.conns[conn]--; k.conns[conn] <= 0 {
			delete(k.conns, conn)
		}
		if k.peers[host]--; k.peers[host] <= 0 {
			delete(k.peers, host)
		}
	}, nil
}

// flowDefaults fills the flow settings of opts.
func flowDefaults(opts *Options) {
	if opts.SendTimeout == 0 { // negative: none
		opts.SendTimeout = DefaultSendTimeout
	}
	if opts.SlowSend <= 0 {
		opts.SlowSend = DefaultSlowSend
	}
	if opts.FirstRequestTimeout == 0 { // negative: none
		opts.FirstRequestTimeout = DefaultFirstRequestTimeout
	}
	if opts.MaxStreamsPerConnection == 0 {
		opts.MaxStreamsPerConnection = DefaultMaxStreamsPerConnection
	}
	if opts.MaxStreamsPerPeer == 0 {
		opts.MaxStreamsPerPeer = DefaultMaxStreamsPerPeer
	}
}
