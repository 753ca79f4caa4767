package xdsserver

import "time"

// In-flight bound. gRPC's Send returns once a response is queued, not
// when the client has read it, so a connect storm of thousands of
// proxies would queue every proxy's whole config in server memory at
// once. A connection therefore holds a slot from its first unACKed
// response until every response is ACKed (or NACKed), and at most
// MaxInFlight connections hold one: memory is bounded by what those
// proxies are reading, and the others wait their turn. A client that never
// ACKs gives its slot back after slotTimeout.

const slotTimeout = 10 * time.Second

// acquireSlot takes a slot unless the connection holds one. It blocks the
// connection's loop (and only it) while none is free.
func (c *conn) acquireSlot() {
	c.mu.Lock()
	held := c.slot
	c.mu.Unlock()
	if held || c.s.slots == nil {
		return
	}
	c.s.slots <- struct{}{}
	c.mu.Lock()
	c.slot = true
	c.slotGen++
	gen := c.slotGen
	c.mu.Unlock()
	time.AfterFunc(slotTimeout, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.slot && c.slotGen == gen {
			c.releaseSlotLocked()
		}
	})
}

// releaseSlotLocked gives the slot back; c.mu is held.
func (c *conn) releaseSlotLocked() {
	if c.slot {
		c.slot = false
		<-c.s.slots
	}
}

// settleSlotLocked releases the slot when nothing is waiting for an ACK;
// c.mu is held.
func (c *conn) settleSlotLocked() {
	for _, w := range c.watches {
		if w.awaitingAck {
			return
		}
	}
	c.releaseSlotLocked()
}
