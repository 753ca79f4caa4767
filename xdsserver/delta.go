package xdsserver

import (
	"maps"
	"slices"
	"strconv"
	"time"
	"unique"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"

	"github.com/baremesh/baremesh/core/push"
	"github.com/baremesh/baremesh/xdsserver/gen"
)

type deltaStream = grpc.BidiStreamingServer[discovery.DeltaDiscoveryRequest, discovery.DeltaDiscoveryResponse]

// DeltaAggregatedResources implements ADS, incremental (Delta) variant:
// subscriptions change by subscribe/unsubscribe, every resource has its
// own version (a hash of its bytes), and a response carries only the
// resources whose version the client does not hold, plus the names of
// removed ones.
func (s *Server) DeltaAggregatedResources(stream deltaStream) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	return serveConn(s, stream.Context(), first.GetNode(), func(c *conn) { c.delta = stream },
		first, stream.Recv, (*conn).onDeltaRequest)
}

// onDeltaRequest applies the ACK or NACK the request carries, then its
// subscription changes, and answers when the subscription changed.
func (c *conn) onDeltaRequest(r *discovery.DeltaDiscoveryRequest) error {
	typeURL := r.GetTypeUrl()
	if _, ok := c.s.opts.Generators[typeURL]; !ok {
		return nil
	}
	c.mu.Lock()
	w := c.watches[typeURL]
	first := w == nil
	if first {
		w = &watch{typeURL: typeURL, initial: maps.Clone(r.GetInitialResourceVersions()), rejected: map[string][32]byte{}, inFlight: map[string]sentResp{}}
		c.watches[typeURL] = w
		// Legacy wildcard: a first LDS/CDS request that names nothing.
		w.wildcard = len(r.GetResourceNamesSubscribe()) == 0 && (typeURL == gen.ListenerType || typeURL == gen.ClusterType)
	}
	if nonce := r.GetResponseNonce(); nonce != "" {
		sent, tracked := w.inFlight[nonce]
		delete(w.inFlight, nonce)
		switch {
		case !tracked:
			// an ACK of a response we no longer track: nothing to do
		case r.GetErrorDetail() != nil:
			w.awaitingAck = false
			w.nacks++
			w.nack = &nack{Nonce: nonce, Version: w.sentVer, Message: r.GetErrorDetail().GetMessage(), At: time.Now()}
			w.rollback(sent, &c.s.held)
			c.s.metrics.nacks.WithLabelValues(shortType(typeURL)).Inc()
			c.s.log.Warn("proxy rejected config (NACK); not resending it until the config changes",
				"proxy", c.proxy.ID, "type", shortType(typeURL), "error", r.GetErrorDetail().GetMessage())
		default:
			w.acks++
			w.ackedVer, w.ackedAt = w.sentVer, time.Now()
			if nonce == w.sentNonce {
				w.awaitingAck = false
			}
			c.observeConvergence(w)
			c.s.metrics.requests.WithLabelValues(shortType(typeURL), "ack").Inc()
		}
	} else {
		w.requests++
		c.s.metrics.requests.WithLabelValues(shortType(typeURL), "request").Inc()
	}
	changed := first
	var added []string
	for _, n := range r.GetResourceNamesSubscribe() {
		if n == "*" {
			changed = changed || !w.wildcard
			w.wildcard = true
			continue
		}
		if _, found := slices.BinarySearch(w.names, n); !found {
			added = append(added, unique.Make(n).Value())
		}
	}
	var dropped map[string]bool
	for _, n := range r.GetResourceNamesUnsubscribe() {
		if n == "*" {
			w.wildcard = false
			changed = true
			continue
		}
		if _, found := slices.BinarySearch(w.names, n); found {
			if dropped == nil {
				dropped = map[string]bool{}
			}
			dropped[n] = true
		}
	}
	// Only the added names need an answer, unless the wildcard changed or
	// this is the type's first request.
	var only []string
	if len(added) > 0 || len(dropped) > 0 {
		// Into a new list: the old one is shared with other connections
		// and never altered.
		slices.Sort(added)
		added = slices.Compact(added)
		names := mergeNames(w.names, added, dropped)
		w.list = c.s.lists.get(namesHash(names), names)
		w.names = w.list.names
		if len(dropped) > 0 {
			w.hold(&c.s.held, nil, dropped)
		}
		if !changed && !w.wildcard {
			only = added // may be empty: nothing to send
		}
		changed = true
	}
	c.mu.Unlock()
	if changed && (only == nil || len(only) > 0) {
		return c.respondDelta(w, nil, first, only)
	}
	return nil
}

// mergeNames returns names (sorted) with added (sorted, not in names)
// merged in and the names in drop left out.
func mergeNames(names, added []string, drop map[string]bool) []string {
	out := make([]string, 0, len(names)+len(added))
	j := 0
	for _, n := range names {
		for j < len(added) && added[j] < n {
			out = append(out, added[j])
			j++
		}
		if !drop[n] {
			out = append(out, n)
		}
	}
	return append(out, added[j:]...)
}

// respondDelta sends what the client lacks: resources whose version it
// does not hold (and did not reject), and removals. force answers even
// when there is nothing to send (a first request for a type).
// only, if not nil, narrows the work to those names (an endpoint push).
func (c *conn) respondDelta(w *watch, req *push.Request, force bool, only []string) error {
	pc, res, _, ok := c.begin(w, req, only)
	if !ok {
		return nil
	}
	if !slices.IsSortedFunc(res, byName) {
		res = slices.Clone(res)
		slices.SortFunc(res, byName)
	}
	var (
		// send goes out; hold is what the proxy holds anew (send and the
		// resources it already had when it connected), in name order.
		send, hold []*encoded
		removed    []string
		drop       map[string]bool
	)
	send, hold = make([]*encoded, 0, len(res)), make([]*encoded, 0, len(res))
	// gone handles a held resource the generation did not produce.
	gone := func(e *encoded) {
		if _, in := slices.BinarySearch(only, e.name); only != nil && !in {
			return // not looked at in this push
		}
		if drop == nil {
			drop = map[string]bool{}
		}
		drop[e.name] = true
		// A wildcard client drops it; a named subscriber learns that the
		// resource it asked for no longer exists.
		if _, subscribed := slices.BinarySearch(w.names, e.name); w.wildcard || subscribed {
			removed = append(removed, e.name)
		}
	}
	h := 0 // res and held are both sorted by name: walk them together
	for _, r := range res {
		for h < len(w.held) && w.held[h].name < r.name {
			gone(w.held[h])
			h++
		}
		var old *encoded
		if h < len(w.held) && w.held[h].name == r.name {
			old = w.held[h]
			h++
		}
		if old == nil {
			if v, ok := w.initial[r.name]; ok {
				delete(w.initial, r.name)
				if v == r.version() {
					hold = append(hold, r) // it had this version when it connected
					continue
				}
			}
		} else if old.sum == r.sum {
			continue
		}
		if rej, ok := w.rejected[r.name]; ok {
			if rej == r.sum {
				continue // the same config it rejected: wait for a change
			}
			delete(w.rejected, r.name)
		}
		send = append(send, r)
		hold = append(hold, r)
	}
	for ; h < len(w.held); h++ {
		gone(w.held[h])
	}
	prev := w.held
	w.hold(&c.s.held, hold, drop)
	var joined mem.Buffer
	sent := send
	if len(send) > 0 && len(send) == len(w.held) {
		// The proxy's whole list goes out: keep the shared list, not this
		// response's copy, until the ACK.
		joined, sent = w.heldList.deltaJoined(), w.held
	}
	if len(send) == 0 && len(removed) == 0 && !force {
		c.mu.Unlock()
		return nil
	}
	w.nonce++
	nonce := strconv.Itoa(w.nonce)
	version := strconv.FormatUint(pc.Version, 10)
	w.inFlight[nonce] = sentResp{sent: sent, removed: removed, prev: prev}
	w.sentNonce, w.sentVer, w.sentAt = nonce, version+"-"+nonce, time.Now()
	w.awaitingAck = true
	if len(w.rejected) == 0 {
		w.nack = nil
	}
	w.notePushStart(req)
	c.mu.Unlock()
	return c.sendMsg(w, deltaMsg(version, w.typeURL, nonce, send, joined, removed))
}
