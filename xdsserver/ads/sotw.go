package ads

import (
	"slices"
	"strconv"
	"strings"
	"time"
	"unique"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"

	"github.com/baremesh/baremesh/core/push"
	"github.com/baremesh/baremesh/xdsserver/wire"
	"github.com/baremesh/baremesh/xdsserver/xdstype"
)

type sotwStream = grpc.BidiStreamingServer[discovery.DiscoveryRequest, discovery.DiscoveryResponse]

// sotw is the State of the World variant of a connection: every request
// repeats the whole subscription, a response carries the version of the
// whole type, and LDS and CDS go whole.
type sotw struct {
	c      *conn
	stream sotwStream
	// fixed is the type of a per-type service's stream (nil on ADS).
	fixed *xdstype.Type
}

// StreamAggregatedResources implements ADS, State of the World.
func (s *Server) StreamAggregatedResources(stream sotwStream) error {
	return s.serveSotW(stream, nil)
}

func (s *Server) serveSotW(stream sotwStream, fixed *xdstype.Type) error {
	names := wire.Resolver{Shared: &s.lists}
	recv := func() (*wire.Request, error) {
		r := new(wire.Request)
		if err := stream.RecvMsg(r); err != nil { // our codec decodes a wire.Request
			return nil, err
		}
		if err := names.Resolve(r); err != nil {
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
		return r, nil
	}
	return serve(s, stream.Context(), recv, func(r *wire.Request) *corev3.Node { return r.GetNode() },
		func(c *conn) variant { return &sotw{c: c, stream: stream, fixed: fixed} })
}

func (v *sotw) send(m *wire.Msg) error { return v.stream.SendMsg(m) }

// onRequest tells an initial request, an ACK, a NACK and a stale
// response apart and acts on each.
func (v *sotw) onRequest(m any) error {
	c, r := v.c, m.(*wire.Request)
	// The type URL is kept by the watch: interned (the resolver already
	// did it for requests our codec decoded).
	typeURL := unique.Make(r.GetTypeUrl()).Value()
	if typeURL == "" && v.fixed != nil {
		typeURL = v.fixed.URL
	}
	if v.fixed != nil && typeURL != v.fixed.URL {
		return status.Errorf(codes.InvalidArgument, "type %q requested on the %s service", typeURL, v.fixed.Short)
	}
	t := c.s.types[typeURL]
	if t == nil {
		c.report(Report{TypeURL: typeURL, VersionInfo: r.GetVersionInfo(), ResponseNonce: r.GetResponseNonce(),
			ResourceNames: r.List.Slice(), ErrorDetail: r.GetErrorDetail()})
		return nil
	}
	c.mu.Lock()
	w, _ := c.sub(typeURL, func() *sub { return &sub{typ: t, typeURL: typeURL} })
	nonce := r.GetResponseNonce()
	if w.sentNonce == "" {
		// Nothing of this type was sent on this stream: whatever nonce it
		// carries, this is the initial request. (Istio's MCP client, adsc,
		// puts a timestamp in every request's nonce; istiod answers a new
		// type the same way.)
		nonce = ""
	}
	if nonce != "" && nonce != w.sentNonce {
		c.mu.Unlock()
		c.s.metrics.requests.WithLabelValues(t.Short, "stale").Inc()
		return nil // stale: the client has not seen our latest response yet
	}
	namesChanged := w.setNames(r, &c.s.held)
	// A changed subscription of EDS or RDS is answered with the resources
	// the proxy lacks; LDS and CDS are always sent whole.
	var only []string
	if namesChanged && nonce != "" && t.Partial && !w.wildcard {
		only = w.unheld()
	}
	switch {
	case nonce == "":
		w.requests++
		c.mu.Unlock()
		c.s.metrics.requests.WithLabelValues(t.Short, "request").Inc()
		return v.respond(w, nil, true, nil) // initial request, or a reconnect
	case r.GetErrorDetail() != nil:
		w.awaitingAck = false
		w.nacks++
		w.nack = &nack{Nonce: w.sentNonce, Version: w.sentVer, Message: strings.Clone(r.GetErrorDetail().GetMessage()), At: time.Now()}
		w.rejectLast(&c.s.held)
		w.ackedVer = strings.Clone(r.GetVersionInfo())
		c.mu.Unlock()
		c.s.metrics.nacks.WithLabelValues(t.Short).Inc()
		c.s.log.Warn("proxy rejected config (NACK); not resending it until the config changes",
			"proxy", c.proxy.ID, "type", t.Short, "version", w.sentVer, "error", r.GetErrorDetail().GetMessage())
		if namesChanged && (only == nil || len(only) > 0) {
			return v.respond(w, nil, false, only)
		}
		return nil
	default:
		w.acks++
		w.ackedVer, w.ackedAt = strings.Clone(r.GetVersionInfo()), time.Now()
		w.awaitingAck, w.last = false, sentResp{}
		c.observeConvergence(w)
		c.mu.Unlock()
		c.s.metrics.requests.WithLabelValues(t.Short, "ack").Inc()
		if namesChanged && (only == nil || len(only) > 0) {
			return v.respond(w, nil, false, only) // the subscription changed with the ACK
		}
		return nil
	}
}

// respond generates w's type and sends what the proxy lacks. LDS and CDS
// go whole, unless identical to what was sent last (a no-op) or to what
// the proxy NACKed (it would only NACK again). EDS and RDS carry only the
// resources whose bytes changed, never one identical to a rejected
// version. force answers even with nothing new (an initial request needs
// an answer). only, if not nil, narrows generation to those names (an
// endpoint push regenerates only the clusters of changed services).
func (v *sotw) respond(w *sub, req *push.Request, force bool, only []string) error {
	c := v.c
	g, ok := c.generate(w, req, only)
	if !ok {
		return nil
	}
	c.mu.Lock()
	out, ok := v.diff(w, g, req, force)
	c.mu.Unlock()
	if !ok {
		return nil
	}
	// Joining a whole set into one buffer is done once per set, outside
	// c.mu.
	var one mem.BufferSlice
	if out.one != nil {
		one = out.one()
	}
	return c.sendMsg(w, wire.SotWMsg(out.version, w.typeURL, out.nonce, out.send, one))
}

// sotwOut is a SotW response decided on: its resources, or one buffer of
// them all (one, when not nil).
type sotwOut struct {
	version, nonce string
	send           []*wire.Resource
	one            func() mem.BufferSlice
}

// diff works out the response to send for generation g of w, and
// records it as sent; ok is false if there is nothing to send. c.mu is
// held.
func (v *sotw) diff(w *sub, g generated, req *push.Request, force bool) (out sotwOut, ok bool) {
	res := g.res
	var send []*wire.Resource
	var whole func() mem.BufferSlice
	if w.typ.Partial {
		if !slices.IsSortedFunc(res, wire.ByName) {
			res = slices.Clone(res)
			slices.SortFunc(res, wire.ByName)
		}
		// send is res itself until a result is skipped (an initial
		// response sends all of them, without a copy).
		send = res
		skipped := false
		skip := func(i int) {
			if !skipped {
				send, skipped = append(make([]*wire.Resource, 0, len(res)-1), res[:i]...), true
			}
		}
		// res and held are both sorted. A few results (an endpoint push)
		// are looked up; a whole subscription is walked alongside.
		few := len(res)*8 < len(w.held)
		h := 0
		for i, r := range res {
			if rej, ok := w.rejected[r.Name]; ok {
				if rej == r.Sum {
					skip(i)
					continue
				}
				delete(w.rejected, r.Name) // the config moved on
			}
			var old *wire.Resource
			if few {
				old = wire.Find(w.held, r.Name)
			} else {
				for h < len(w.held) && w.held[h].Name < r.Name {
					h++
				}
				if h < len(w.held) && w.held[h].Name == r.Name {
					old = w.held[h]
				}
			}
			if !force && old != nil && old.Sum == r.Sum {
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
			return out, false
		}
		w.last = sentResp{sent: send, prev: w.held}
		w.hold(&v.c.s.held, send, nil)
		if len(send) == len(w.held) {
			// The proxy's whole list goes out: keep the shared list, not
			// this response's copy, until the ACK.
			held := w.heldList // (joined after c.mu is let go)
			whole = func() mem.BufferSlice { return mem.BufferSlice{held.SotWJoined()} }
			w.last.sent = w.held
		}
	} else {
		sum := wire.SetSum(res)
		if !force && (sum == w.sentHash || (w.nack != nil && sum == w.nackedHash)) {
			return out, false
		}
		if sum != w.nackedHash {
			w.nack = nil // a new config: the old rejection no longer applies
		}
		w.sentHash, w.held = sum, res
		send = res
	}
	w.nonce++
	nonce := strconv.Itoa(w.nonce)
	version := strconv.FormatUint(g.pc.Version, 10) + "-" + nonce
	w.sentNonce, w.sentVer, w.sentAt = nonce, version, time.Now()
	w.awaitingAck = true
	w.notePushStart(req)
	out = sotwOut{version: version, nonce: nonce, send: send}
	switch {
	case g.joined != nil && len(send) == len(res):
		out.one = func() mem.BufferSlice { return g.joined(false) } // everything generated goes out: shared buffers
	case whole != nil:
		out.one = whole
	}
	return out, true
}

// rejectLast records a NACK of the last response; c.mu is held.
func (w *sub) rejectLast(lists *wire.HeldLists) {
	if !w.typ.Partial {
		w.nackedHash = w.sentHash
		return
	}
	w.rollback(w.last, lists)
	w.last = sentResp{}
}
