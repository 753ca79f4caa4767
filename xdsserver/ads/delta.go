package ads

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
	"github.com/baremesh/baremesh/xdsserver/wire"
)

type deltaStream = grpc.BidiStreamingServer[discovery.DeltaDiscoveryRequest, discovery.DeltaDiscoveryResponse]

// delta is the incremental (Delta) variant of a connection:
// subscriptions change by subscribe/unsubscribe, every resource has its
// own version (a hash of its bytes), and a response carries only the
// resources whose version the client does not hold, plus the names of
// removed ones.
type delta struct {
	c      *conn
	stream deltaStream
}

// DeltaAggregatedResources implements ADS, incremental (Delta) variant.
func (s *Server) DeltaAggregatedResources(stream deltaStream) error {
	recv := func() (*wire.DeltaRequest, error) {
		r := &wire.DeltaRequest{Shared: &s.lists}
		if err := stream.RecvMsg(r); err != nil { // our codec shares a long subscription's list
			return nil, err
		}
		return r, nil
	}
	return serve(s, stream.Context(), recv, (*wire.DeltaRequest).GetNode,
		func(c *conn) variant { return &delta{c: c, stream: stream} })
}

func (v *delta) send(m *wire.Msg) error { return v.stream.SendMsg(m) }

// onDeltaRequest applies the ACK or NACK the request carries, then its
// subscription changes, and answers when the subscription changed.
func (v *delta) onRequest(m any) error {
	c, r := v.c, m.(*wire.DeltaRequest)
	typeURL := r.GetTypeUrl()
	t := c.s.types[typeURL]
	if t == nil {
		c.report(Report{TypeURL: typeURL, ResponseNonce: r.GetResponseNonce(), ResourceNames: r.Subscribe(),
			ErrorDetail: r.GetErrorDetail(), Delta: true})
		return nil
	}
	c.mu.Lock()
	w, first := c.sub(typeURL, func() *sub {
		return &sub{typ: t, typeURL: typeURL, initial: maps.Clone(r.GetInitialResourceVersions()), rejected: map[string][32]byte{}, inFlight: map[string]sentResp{},
			// Legacy wildcard: a first request of a wildcard type that names nothing.
			wildcard: len(r.Subscribe()) == 0 && t.Wildcard}
	})
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
			c.s.metrics.nacks.WithLabelValues(t.Short).Inc()
			c.s.log.Warn("proxy rejected config (NACK); not resending it until the config changes",
				"proxy", c.proxy.ID, "type", t.Short, "error", r.GetErrorDetail().GetMessage())
		default:
			w.acks++
			w.ackedVer, w.ackedAt = w.sentVer, time.Now()
			if nonce == w.sentNonce {
				w.awaitingAck = false
			}
			c.observeConvergence(w)
			c.s.metrics.requests.WithLabelValues(t.Short, "ack").Inc()
		}
	} else {
		w.requests++
		c.s.metrics.requests.WithLabelValues(t.Short, "request").Inc()
	}
	changed := first
	var added []string
	// A long subscription comes as a shared list (sorted, each name once,
	// no "*"): to a stream subscribed to nothing yet, all of it is added.
	shared := r.Subscribed != nil && len(w.names) == 0
	if shared {
		added = r.Subscribed.Names // not to be altered
	} else {
		for _, n := range r.Subscribe() {
			if n == "*" {
				changed = changed || !w.wildcard
				w.wildcard = true
				continue
			}
			if _, found := slices.BinarySearch(w.names, n); !found {
				added = append(added, unique.Make(n).Value())
			}
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
		switch {
		case shared:
			w.list = r.Subscribed
		case len(w.names) == 0: // nothing to merge with (nor to drop)
			slices.Sort(added)
			added = slices.Compact(added)
			w.list = c.s.lists.Get(wire.NamesHash(added), added)
		default:
			slices.Sort(added)
			added = slices.Compact(added)
			names := mergeNames(w.names, added, dropped)
			w.list = c.s.lists.Get(wire.NamesHash(names), names)
		}
		w.names = w.list.Names
		if len(dropped) > 0 {
			w.hold(&c.s.held, nil, dropped)
		}
		if !changed && !w.wildcard {
			// Empty when names were only dropped: nothing to send (the
			// client forgets them), nor to generate.
			only = append([]string{}, added...)
		}
		changed = true
	}
	c.mu.Unlock()
	if changed && (only == nil || len(only) > 0) {
		return v.respond(w, nil, first, only)
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
func (v *delta) respond(w *sub, req *push.Request, force bool, only []string) error {
	c := v.c
	g, ok := c.generate(w, req, only)
	if !ok {
		return nil
	}
	c.mu.Lock()
	m := v.diff(w, g, force, req, only)
	c.mu.Unlock()
	if m == nil {
		return nil
	}
	return c.sendMsg(w, m)
}

// diff works out the response to send for generation g of w, and records
// it as in flight; nil if there is nothing to send. c.mu is held.
func (v *delta) diff(w *sub, g generated, force bool, req *push.Request, only []string) *wire.Msg {
	res := g.res
	if !slices.IsSortedFunc(res, wire.ByName) {
		res = slices.Clone(res)
		slices.SortFunc(res, wire.ByName)
	}
	var (
		// send goes out; hold is what the proxy holds anew (send and the
		// resources it already had when it connected), in name order.
		send, hold []*wire.Resource
		removed    []string
		drop       map[string]bool
	)
	// hold stays nil while it is send (no resource held from before the
	// stream): one list, not two, for each proxy connecting.
	send = make([]*wire.Resource, 0, len(res))
	keep := func(r *wire.Resource) {
		if hold == nil {
			hold = append(make([]*wire.Resource, 0, len(res)), send...)
		}
		hold = append(hold, r)
	}
	// gone handles a held resource the generation did not produce.
	gone := func(e *wire.Resource) {
		if _, in := slices.BinarySearch(only, e.Name); only != nil && !in {
			return // not looked at in this push
		}
		if drop == nil {
			drop = map[string]bool{}
		}
		drop[e.Name] = true
		// A wildcard client drops it; a named subscriber learns that the
		// resource it asked for no longer exists.
		if _, subscribed := slices.BinarySearch(w.names, e.Name); w.wildcard || subscribed {
			removed = append(removed, e.Name)
		}
	}
	h := 0 // res and held are both sorted by name: walk them together
	for _, r := range res {
		for h < len(w.held) && w.held[h].Name < r.Name {
			gone(w.held[h])
			h++
		}
		var old *wire.Resource
		if h < len(w.held) && w.held[h].Name == r.Name {
			old = w.held[h]
			h++
		}
		if old == nil {
			if v, ok := w.initial[r.Name]; ok {
				delete(w.initial, r.Name)
				if v == r.Version() {
					keep(r) // it had this version when it connected
					continue
				}
			}
		} else if old.Sum == r.Sum {
			continue
		}
		if rej, ok := w.rejected[r.Name]; ok {
			if rej == r.Sum {
				continue // the same config it rejected: wait for a change
			}
			delete(w.rejected, r.Name)
		}
		send = append(send, r)
		if hold != nil {
			hold = append(hold, r)
		}
	}
	for ; h < len(w.held); h++ {
		gone(w.held[h])
	}
	if hold == nil {
		hold = send // not altered by w.hold
	}
	prev := w.held
	w.hold(&v.c.s.held, hold, drop)
	var joined mem.BufferSlice
	sent := send
	if len(send) > 0 && len(send) == len(w.held) {
		// The proxy's whole list goes out: keep the shared list, not this
		// response's copy, until the ACK; send the generation's framing
		// when it is all of it (a VM's is shared with VMs of other
		// services, but for its inbound part), else the list's.
		sent = w.held
		if g.joined != nil && len(send) == len(g.res) {
			joined = g.joined(true)
		} else {
			joined = mem.BufferSlice{w.heldList.DeltaJoined()}
		}
	}
	if len(send) == 0 && len(removed) == 0 && !force {
		return nil
	}
	w.nonce++
	nonce := strconv.Itoa(w.nonce)
	version := strconv.FormatUint(g.pc.Version, 10)
	w.inFlight[nonce] = sentResp{sent: sent, removed: removed, prev: prev}
	w.sentNonce, w.sentVer, w.sentAt = nonce, version+"-"+nonce, time.Now()
	w.awaitingAck = true
	if len(w.rejected) == 0 {
		w.nack = nil
	}
	w.notePushStart(req)
	return wire.DeltaMsg(version, w.typeURL, nonce, send, joined, removed)
}
