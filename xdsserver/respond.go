package xdsserver

import (
	"hash/maphash"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/baremesh/baremesh/core/push"
	"github.com/baremesh/baremesh/xdsserver/gen"
	"google.golang.org/grpc/mem"
)

// incremental reports whether a SotW response of the type may carry a
// subset of the subscription: true for EDS and RDS, whose resources are
// named and not state of the world; LDS and CDS are always sent whole.
func incremental(typeURL string) bool { return typeURL == gen.EndpointType || typeURL == gen.RouteType }

// respond generates w's type and sends what the proxy lacks. LDS and CDS
// go whole, unless identical to what was sent last (a no-op) or to what
// the proxy NACKed (it would only NACK again). EDS and RDS carry only the
// resources whose bytes changed, never one identical to a rejected
// version. force answers even with nothing new (an initial request needs
// an answer). only, if not nil, narrows generation to those names (an
// endpoint push regenerates only the clusters of changed services).
func (c *conn) respond(w *watch, req *push.Request, force bool, only []string) error {
	pc, res, joined, ok := c.begin(w, req, only)
	if !ok {
		return nil
	}
	var send []*encoded
	var whole func() mem.Buffer
	if incremental(w.typeURL) {
		if !slices.IsSortedFunc(res, byName) {
			res = slices.Clone(res)
			slices.SortFunc(res, byName)
		}
		// send is res itself until a result is skipped (an initial
		// response sends all of them, without a copy).
		send = res
		skipped := false
		skip := func(i int) {
			if !skipped {
				send, skipped = append(make([]*encoded, 0, len(res)-1), res[:i]...), true
			}
		}
		// res and held are both sorted. A few results (an endpoint push)
		// are looked up; a whole subscription is walked alongside.
		few := len(res)*8 < len(w.held)
		h := 0
		for i, r := range res {
			if rej, ok := w.rejected[r.name]; ok {
				if rej == r.sum {
					skip(i)
					continue
				}
				delete(w.rejected, r.name) // the config moved on
			}
			var old *encoded
			if few {
				old = findHeld(w.held, r.name)
			} else {
				for h < len(w.held) && w.held[h].name < r.name {
					h++
				}
				if h < len(w.held) && w.held[h].name == r.name {
					old = w.held[h]
				}
			}
			if !force && old != nil && old.sum == r.sum {
				skip(i) // the proxy holds it (perhaps the version before a rejected one)
				continue
			}
			if skipped {
				send = append(send, r)
			}
		}
		if len(w.rejected) == 0 {
			w.nack = nil
		}
		if len(send) == 0 && !force {
			c.mu.Unlock()
			return nil
		}
		w.last = sentResp{sent: send, prev: w.held}
		w.hold(&c.s.held, send, nil)
		if len(send) == len(w.held) {
			// The proxy's whole list goes out: keep the shared list, not
			// this response's copy, until the ACK.
			whole, w.last.sent = w.heldList.sotwJoined, w.held
		}
	} else {
		sum := setSum(res)
		if !force && (sum == w.sentHash || (w.nack != nil && sum == w.nackedHash)) {
			c.mu.Unlock()
			return nil
		}
		if sum != w.nackedHash {
			w.nack = nil // a new config: the old rejection no longer applies
		}
		w.sentHash, w.held = sum, res
		send = res
	}
	w.nonce++
	nonce := strconv.Itoa(w.nonce)
	version := strconv.FormatUint(pc.Version, 10) + "-" + nonce
	w.sentNonce, w.sentVer, w.sentAt = nonce, version, time.Now()
	w.awaitingAck = true
	w.notePushStart(req)
	c.mu.Unlock()
	var one mem.Buffer
	switch {
	case joined != nil && len(send) == len(res):
		one = joined() // everything generated goes out: one shared buffer
	case whole != nil:
		one = whole()
	}
	return c.sendMsg(w, sotwMsg(version, w.typeURL, nonce, send, one))
}

// begin starts a response for w: it generates the subscription (or only
// those names). It returns with c.mu held; ok is false (nothing held)
// when there is no snapshot yet or generation failed (recorded on w; the
// proxy keeps its last config).
func (c *conn) begin(w *watch, req *push.Request, only []string) (pc *push.PushContext, res []*encoded, joined func() mem.Buffer, ok bool) {
	pc = c.s.snaps.Current()
	if pc == nil {
		return nil, nil, nil, false // not ready: the first push will answer
	}
	c.mu.Lock()
	names, list := w.names, w.list
	if w.wildcard {
		names, list = nil, nil // Delta may list names beside a wildcard
	}
	c.mu.Unlock()
	if only != nil {
		names, list = only, nil
	}
	res, joined, err := c.generate(pc, w.typeURL, names, list, req)
	c.mu.Lock()
	if err != nil {
		w.genErr = err.Error()
		c.mu.Unlock()
		c.s.log.Error("generation failed; proxy keeps its last config", "proxy", c.proxy.ID, "type", shortType(w.typeURL), "err", err)
		return nil, nil, nil, false
	}
	w.genErr = ""
	return pc, res, joined, true
}

// setSum identifies a whole LDS or CDS set by its resources' content
// hashes, in order (a fast hash: it runs per proxy on every push).
func setSum(res []*encoded) uint64 {
	var h maphash.Hash
	h.SetSeed(namesSeed)
	for _, r := range res {
		h.Write(r.sum[:])
	}
	return h.Sum64()
}

func byName(a, b *encoded) int { return strings.Compare(a.name, b.name) }

// rejectLast records a NACK of the last response; c.mu is held.
func (w *watch) rejectLast(lists *heldLists) {
	if !incremental(w.typeURL) {
		w.nackedHash = w.sentHash
		return
	}
	w.rollback(w.last, lists)
	w.last = sentResp{}
}

// sendMsg sends a framed response and accounts for it.
func (c *conn) sendMsg(w *watch, m *rawMsg) error {
	c.s.sendSem <- struct{}{}
	var err error
	if c.delta != nil {
		err = c.delta.SendMsg(m)
	} else {
		err = c.stream.SendMsg(m)
	}
	<-c.s.sendSem
	if err != nil {
		return err
	}
	size := m.size()
	c.s.metrics.pushes.WithLabelValues(shortType(w.typeURL)).Inc()
	c.s.metrics.pushBytes.WithLabelValues(shortType(w.typeURL)).Add(float64(size))
	for _, r := range c.curRecs {
		r.sent(shortType(w.typeURL), size)
	}
	return nil
}
