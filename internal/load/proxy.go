package load

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Record is what one simulated proxy saw. Times are zero until they
// happen.
type Record struct {
	ID string
	// Connected is when its first stream opened and sent its requests.
	Connected  time.Time
	Reconnects int
	// FirstRecv, LastResp and LastAck are per Type: the first response,
	// the latest response, and when the latest ACK was sent.
	FirstRecv [numTypes]time.Time
	LastResp  [numTypes]time.Time
	LastAck   [numTypes]time.Time
	Responses [numTypes]int
	Bytes     [numTypes]int64
	Nacks     int
	// Configured is when it first held, ACKed, CDS and LDS and the EDS
	// and RDS resources they refer to (when Envoy would finish warming).
	Configured time.Time
	// Err is the error that stopped it for good, if any.
	Err error
}

// typeState is one type's protocol state; only the proxy's goroutine
// touches it.
type typeState struct {
	set     *Set
	version string    // SotW: last accepted version_info; Delta: system_version_info
	nonce   string    // last nonce received on the current stream
	names   *nameList // the names subscribed to, of a non-wildcard type
	asked   bool      // a request for the type went out on the current stream
}

// proxy is one simulated Envoy with its own stream.
type proxy struct {
	f    *Fleet
	idx  int
	node *corev3.Node
	// nodeWire is node encoded, for the first request of each stream.
	nodeWire []byte
	cc       *grpc.ClientConn
	st       [numTypes]typeState

	mu    sync.Mutex // guards acked and rec
	acked [numTypes]*Set
	rec   Record
}

// run keeps the proxy's stream up until ctx ends or the server refuses
// the protocol.
func (p *proxy) run(ctx context.Context) {
	backoff := 100 * time.Millisecond
	for attempt := 0; ; attempt++ {
		var err error
		if p.f.opts.Mode == Delta {
			err = p.runDelta(ctx)
		} else {
			err = p.runSotW(ctx)
		}
		if ctx.Err() != nil {
			return
		}
		if c := status.Code(err); c == codes.Unimplemented || c == codes.InvalidArgument || c == codes.PermissionDenied {
			p.mu.Lock()
			p.rec.Err = err
			p.mu.Unlock()
			p.f.fail(err)
			return
		}
		p.mu.Lock()
		p.rec.Reconnects++
		p.mu.Unlock()
		// Jittered exponential backoff, as Envoy reconnects.
		d := backoff/2 + rand.N(backoff)
		backoff = min(2*backoff, 5*time.Second)
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

func (p *proxy) connected() {
	p.mu.Lock()
	if p.rec.Connected.IsZero() {
		p.rec.Connected = time.Now()
	}
	p.mu.Unlock()
}

func (p *proxy) received(t Type, n int) {
	now := time.Now()
	p.mu.Lock()
	if p.rec.FirstRecv[t].IsZero() {
		p.rec.FirstRecv[t] = now
	}
	p.rec.LastResp[t] = now
	p.rec.Responses[t]++
	p.rec.Bytes[t] += int64(n)
	p.mu.Unlock()
	p.f.count(t, n)
}

func (p *proxy) nacked() {
	p.mu.Lock()
	p.rec.Nacks++
	p.mu.Unlock()
}

// publish makes the proxy's current state of t visible to predicates;
// ackAt is when its ACK was sent, zero when the change is local (a
// resource forgotten after an unsubscription).
func (p *proxy) publish(t Type, ackAt time.Time) {
	p.mu.Lock()
	p.acked[t] = p.st[t].set
	v := View{sets: p.acked}
	if !ackAt.IsZero() {
		p.rec.LastAck[t] = ackAt
		if p.rec.Configured.IsZero() && v.Configured() {
			p.rec.Configured = ackAt
		}
	}
	p.mu.Unlock()
	// A state change without an ACK (a dropped subscription) may also be
	// what a waiter waits for.
	at := ackAt
	if at.IsZero() {
		at = time.Now()
	}
	p.f.notify(p.idx, v, at)
}

func (p *proxy) view() View {
	p.mu.Lock()
	defer p.mu.Unlock()
	return View{sets: p.acked}
}

func (p *proxy) record() Record {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rec
}

// diff returns the names in next and not in prev, and the reverse; both
// lists sorted.
func diff(prev, next []string) (add, del []string) {
	i, j := 0, 0
	for i < len(prev) || j < len(next) {
		switch {
		case j == len(next) || (i < len(prev) && prev[i] < next[j]):
			del = append(del, prev[i])
			i++
		case i == len(prev) || next[j] < prev[i]:
			add = append(add, next[j])
			j++
		default:
			i++
			j++
		}
	}
	return add, del
}
