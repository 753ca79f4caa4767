package ads

import (
	"runtime"
	"sync"
)

// The push fan-out wakes connections a few at a time (issue #30), as
// istiod's push queue does. A push used to wake every connection's
// goroutine at once: 2,000 goroutines runnable in one instant, most of
// them overflowing into Go's global run queue, where every goroutine the
// network wakes (a proxy's request, a /metrics scrape) then waited
// behind them (an execution trace of a 2,000-proxy push, 100 proxies a
// connection: the woken connections were the largest share of the time
// goroutines spent runnable, 69 ms each on average; 0.7 ms after). Now
// a connection is woken holding a turn and gives it back when it starts
// a send, when its push is handled, or when its stream ends; at most
// maxTurns connections hold one. A connection already in a send is woken
// without a turn: a proxy that does not read must not keep one.
//
// Measured (BenchmarkScale, 2,000 SotW proxies, alternated runs): with a
// connection per proxy, /metrics from a process of its own during the
// push 0.92-1.38 s at the slowest before, 0.11-0.46 s after, the first
// proxy with the new cluster 249-310 ms before, 143-189 ms after; with
// 100 proxies a connection the first proxy 232-247 ms before, 145-175
// ms after, the peak RSS 229-260 MB before, 200-205 MB after.

// maxTurns is how many connections may be working out a push at once.
func maxTurns() int { return max(4, 2*runtime.GOMAXPROCS(0)) }

// fanout is the queue of connections with a push to handle.
type fanout struct {
	turns chan struct{}

	mu      sync.Mutex
	queue   []*conn
	running bool // a waker goroutine is draining queue
}

func newFanout() *fanout { return &fanout{turns: make(chan struct{}, maxTurns())} }

// wake queues c to be woken for its pending push.
func (f *fanout) wake(c *conn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c.queued {
		return // its wake-up is still ahead: it will see the merged push
	}
	c.queued = true
	f.queue = append(f.queue, c)
	if !f.running {
		f.running = true
		go f.waker()
	}
}

// waker wakes the queued connections in order, each with a turn, and
// ends when the queue is empty.
func (f *fanout) waker() {
	for {
		f.mu.Lock()
		if len(f.queue) == 0 {
			f.queue, f.running = nil, false
			f.mu.Unlock()
			return
		}
		c := f.queue[0]
		f.queue[0] = nil
		f.queue = f.queue[1:]
		c.queued = false
		f.mu.Unlock()
		if c.ctx.Err() != nil {
			continue // ended: nothing to push
		}
		if !c.sending.Load() && !c.holdsTurn() {
			select {
			case f.turns <- struct{}{}:
			case <-c.ctx.Done():
				continue
			}
			if !c.takeTurn() {
				<-f.turns // the stream has ended
				continue
			}
		}
		select {
		case c.kick <- struct{}{}:
		default: // already woken
		}
	}
}

func (c *conn) holdsTurn() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.turn
}

// takeTurn gives c the turn the waker has taken; false if c's stream has
// ended (nothing would give it back).
func (c *conn) takeTurn() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended {
		return false
	}
	c.turn = true
	return true
}

// endTurn gives back c's turn, if it holds one; end also marks the stream
// ended, so that it takes no turn again.
func (c *conn) endTurn(end bool) {
	c.mu.Lock()
	held := c.turn
	c.turn = false
	c.ended = c.ended || end
	c.mu.Unlock()
	if held {
		<-c.s.fanout.turns
	}
}
