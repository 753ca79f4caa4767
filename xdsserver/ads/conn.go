package ads

import (
	"context"
	"errors"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/core/push"
	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/generation"
	"github.com/baremesh/baremesh/xdsserver/wire"
)

// conn is one xDS stream, SotW or Delta: what both variants share. Its
// loop goroutine owns sending and writes the subscriptions; mu guards
// what debug handlers read.
type conn struct {
	id        string
	s         *Server
	proxy     *model.Proxy
	peer      string
	connected time.Time
	// v is the protocol variant (sotw or delta) answering on this stream.
	v variant

	mu      sync.Mutex
	subs    map[string]*sub
	pending *push.Request
	// pendingOwn is set when a push merged into pending touched one of
	// the proxy's own addresses. pending itself holds no addresses (see
	// enqueue).
	pendingOwn bool
	recs       []*pushRecord // the pushes merged into pending
	kick       chan struct{}
	// turn: c holds one of the fan-out's turns; ended: the stream has
	// ended and takes none (fanout.go).
	turn, ended bool
	// queued is set while c waits in the fan-out's queue (guarded by
	// the fan-out's mu); sending while c's loop is in a send.
	queued  bool
	sending atomic.Bool
	// curRecs are the pushes being handled; only the loop goroutine
	// touches it.
	curRecs []*pushRecord

	// ctx is the stream's. sent and timer belong to the loop goroutine:
	// each send runs on a goroutine of its own (flow.go).
	ctx   context.Context
	sent  chan error
	timer *time.Timer
	slow  bool // the last send outlived SlowSend
}

// variant is what differs between SotW and Delta on a connection.
type variant interface {
	// onRequest handles one request of the stream.
	onRequest(r any) error
	// respond generates w's type and sends what the proxy lacks. force
	// answers even with nothing new; only, if not nil, narrows
	// generation to those names.
	respond(w *sub, req *push.Request, force bool, only []string) error
	// send writes one response.
	send(m *wire.Msg) error
}

// serve runs one connection, SotW or Delta: it authenticates the stream,
// parses the node of the first request, asks the connect hook, registers
// the connection, and loops over requests (read on their own goroutine)
// and pushes until the stream ends. attach makes the variant for the new
// connection.
// MaxNodeIDLength bounds a node ID: a Kubernetes name (253) and
// namespace (63), an IP, a DNS domain and the separators fit with room
// to spare.
const MaxNodeIDLength = 1024

func serve[R any](s *Server, ctx context.Context, recv func() (R, error), node func(R) *corev3.Node,
	attach func(*conn) variant) (err error) {
	var id *model.Identity
	if s.opts.Authenticate != nil {
		if id, err = s.opts.Authenticate(ctx); err != nil {
			return refusal(err, codes.Unauthenticated)
		}
	}
	first, proxy, err := receiveNode(recv, node, s.opts.FirstRequestTimeout)
	if errors.Is(err, errNoFirstRequest) {
		err = status.Errorf(codes.DeadlineExceeded, "no request within %v of the stream's start", s.opts.FirstRequestTimeout)
		s.metrics.refused.WithLabelValues("first_request").Inc()
		var from string
		if p, ok := peer.FromContext(ctx); ok {
			from = p.Addr.String()
		}
		s.log.Warn("xDS stream ended: no first request", "peer", from, "err", err)
		return err
	}
	if err != nil {
		return err
	}
	proxy.Identity = id
	p, _ := peer.FromContext(ctx)
	var addr net.Addr
	if p != nil {
		addr = p.Addr
	}
	if err := s.authorizeNode(proxy, addr); err != nil { // auth.go
		return err
	}
	release, err := s.admit(addr)
	if err != nil {
		return err
	}
	defer release()
	c := &conn{
		id: proxy.ID + "-" + strconv.FormatUint(s.nextID.Add(1), 10), s: s, proxy: proxy,
		connected: time.Now(), subs: map[string]*sub{}, kick: make(chan struct{}, 1), ctx: ctx,
	}
	c.v = attach(c)
	if p != nil {
		c.peer = p.Addr.String()
	}
	log := s.log.With("proxy", proxy.ID, "peer", c.peer)
	if s.opts.OnConnect != nil {
		var addr = p
		if addr == nil {
			addr = &peer.Peer{}
		}
		if err := s.opts.OnConnect(ctx, proxy, addr.Addr, id); err != nil {
			log.Warn("proxy refused by the connect hook", "err", err)
			return refusal(err, codes.PermissionDenied)
		}
	}
	s.addConn(c)
	log.Info("proxy connected", "type", proxy.Type, "proxyless", proxy.Proxyless, "namespace", proxy.Namespace)
	var recvEnd error // the receive error that ended the stream, if one did
	defer func() {
		c.endTurn(true)
		c.stopSender()
		s.removeConn(c)
		reason := streamEnd(ctx, err, recvEnd)
		s.metrics.streamEnds.WithLabelValues(reason).Inc()
		log.Info("proxy disconnected", "reason", reason, "err", firstErr(recvEnd, err, context.Cause(ctx)), "connectedFor", time.Since(c.connected).Round(time.Millisecond))
		if s.opts.OnDisconnect != nil {
			s.opts.OnDisconnect(proxy, err)
		}
	}()

	reqs := make(chan R, 1)
	recvErr := make(chan error, 1)
	go func() {
		for {
			r, err := recv()
			if err != nil {
				recvErr <- err
				return
			}
			select {
			case reqs <- r:
			case <-ctx.Done():
				return
			}
		}
	}()
	if err := c.v.onRequest(first); err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-recvErr:
			recvEnd = err
			if errors.Is(err, ctx.Err()) || status.Code(err) == codes.Canceled {
				return nil
			}
			return err
		case r := <-reqs:
			if err := c.v.onRequest(r); err != nil {
				return err
			}
		case <-c.kick:
			if err := c.onPush(); err != nil {
				return err
			}
		}
	}
}

// receiveNode receives a stream's first request and parses its node, on
// a goroutine of its own that ends with them: decoding a node (the proto
// runtime walking its nested metadata) and parsing it grow a goroutine's
// stack, which the stream's goroutine would otherwise keep for as long
// as the stream is open, or until collections shrink it (issue #30: the
// stacks were 42-47 MB of a VM fleet's connect storm at 2,000 proxies,
// 26 MB after it). A stream that sends no request within timeout (if
// positive) gets errNoFirstRequest: the caps count only streams that
// have sent one (the receiving goroutine ends with the stream).
func receiveNode[R any](recv func() (R, error), node func(R) *corev3.Node, timeout time.Duration) (R, *model.Proxy, error) {
	type received struct {
		first R
		proxy *model.Proxy
		err   error
	}
	done := make(chan received, 1)
	go func() {
		var r received
		defer func() { done <- r }()
		if r.first, r.err = recv(); r.err != nil {
			return
		}
		if n := len(node(r.first).GetId()); n > MaxNodeIDLength {
			// Refused before it is parsed, logged or kept: Istio's node
			// IDs (type~ip~name.namespace~domain) are a few hundred bytes.
			r.err = status.Errorf(codes.InvalidArgument, "node ID of %d bytes refused: at most %d", n, MaxNodeIDLength)
			return
		}
		if r.proxy, r.err = gen.ParseNode(node(r.first)); r.err != nil {
			r.err = status.Errorf(codes.InvalidArgument, "%v", r.err)
		}
	}()
	var expired <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		expired = t.C
	}
	select {
	case r := <-done:
		return r.first, r.proxy, r.err
	case <-expired:
		var zero R
		return zero, nil, errNoFirstRequest
	}
}

// errNoFirstRequest: a stream sent no request within the first-request
// timeout.
var errNoFirstRequest = errors.New("no first request")

// refusal is a hook's error as the client sees it: its gRPC status if it
// has one, else code.
func refusal(err error, code codes.Code) error {
	if _, ok := status.FromError(err); ok {
		return err
	}
	return status.Error(code, err.Error())
}

// enqueue merges req into the pending push. The pipeline's request is
// shared by every connection and never altered, so the first request
// pending is kept as it is, not copied; only a second one merging into
// it makes a copy (of the changed keys, not the addresses). Of req's
// addresses only whether one is the proxy's own matters, and that is
// decided here: an endpoint change of 50,000 addresses was copied into
// every connection's pending push (3.5 MB each, and most of a push's CPU
// with 100 streams that never read, issue #30).
func (c *conn) enqueue(req *push.Request, rec *pushRecord) {
	own := slices.ContainsFunc(c.proxy.IPs, func(ip string) bool { return req.Addresses[ip] })
	if req.Addresses != nil {
		slim := *req
		slim.Addresses = nil
		req = &slim
	}
	c.mu.Lock()
	if c.pending == nil {
		c.pending = req
	} else {
		c.pending = c.pending.Merge(req)
	}
	c.pendingOwn = c.pendingOwn || own
	if rec != nil {
		c.recs = append(c.recs, rec)
	}
	c.mu.Unlock()
	c.s.fanout.wake(c)
}

// sub returns the subscription of typeURL, made by mk if there is none
// (first reports that); c.mu is held.
func (c *conn) sub(typeURL string, mk func() *sub) (w *sub, first bool) {
	if w = c.subs[typeURL]; w == nil {
		w = mk()
		c.subs[typeURL] = w
		first = true
	}
	return w, first
}

// onPush handles the merged pending push. Work that cannot matter is
// skipped: an endpoint-only push regenerates only the types that
// endpoints feed (EDS), and in SotW only the clusters of the services
// whose endpoints changed (EDS is not a state-of-the-world type: a
// partial response leaves the others alone).
func (c *conn) onPush() error {
	c.mu.Lock()
	req, recs, ownWorkload := c.pending, c.recs, c.pendingOwn
	c.pending, c.recs, c.pendingOwn = nil, nil, false
	c.mu.Unlock()
	defer c.endTurn(false)
	if req == nil {
		return nil
	}
	if !req.Full && ownWorkload {
		// The proxy's own workload changed: its inbound listeners and
		// clusters may change too.
		full := *req
		full.Full = true
		req = &full
	}
	defer func() {
		c.s.slo.handled(c, recs)
		for _, r := range recs {
			r.finished()
		}
	}()
	c.curRecs = recs
	defer func() { c.curRecs = nil }()
	var types map[string]bool // nil: every type
	if req.Full && !ownWorkload {
		types = map[string]bool{}
		for t := range generation.Affected(c.s.order, c.s.snaps.Current(), c.proxy, req) {
			types[t.URL] = true
		}
	}
	narrowEDS := !req.Full || (!ownWorkload && servicesOnly(req))
	for _, t := range c.s.order {
		affected := types == nil || types[t.URL] || (t.Endpoints && len(req.Endpoints) > 0)
		if req.Full && !affected {
			continue // this push cannot change t for this proxy
		}
		if !req.Full && !t.Endpoints {
			continue
		}
		if !req.Full && t.EndpointsMatter != nil && !t.EndpointsMatter(c.s.snaps.Current(), c.proxy, req.Endpoints) {
			continue // none of the changed endpoints can alter t
		}
		c.mu.Lock()
		w := c.subs[t.URL]
		// Only the clusters of the services that changed can have new
		// endpoints, unless something like a DestinationRule changed.
		var only []string
		narrow := w != nil && t.Endpoints && narrowEDS && !w.wildcard
		if narrow {
			only = edsNamesFor(w, req)
		}
		c.mu.Unlock()
		if w == nil || (narrow && len(only) == 0) {
			continue
		}
		if err := c.v.respond(w, req, false, only); err != nil {
			return err
		}
	}
	return nil
}

// servicesOnly reports whether a full push changed services and
// endpoints alone (no DestinationRule, Sidecar or mesh config).
func servicesOnly(req *push.Request) bool {
	if req.Reasons.Global() {
		return false
	}
	for k := range req.Configs {
		if !k.Kind.FeedsModel() {
			return false
		}
	}
	return len(req.Services) > 0 || len(req.Endpoints) > 0
}

// edsNamesFor picks the subscribed cluster names of the services that
// changed or whose endpoints changed, through the shared list's host
// index when there is one.
func edsNamesFor(w *sub, req *push.Request) []string {
	var out []string
	if w.list != nil {
		for k := range req.Endpoints {
			out = append(out, w.list.ClustersOf(k.Hostname)...)
		}
		for k := range req.Services {
			if !req.Endpoints[k] {
				out = append(out, w.list.ClustersOf(k.Hostname)...)
			}
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	hosts := make(map[string]bool, len(req.Endpoints)+len(req.Services))
	for k := range req.Endpoints {
		hosts[k.Hostname] = true
	}
	for k := range req.Services {
		hosts[k.Hostname] = true
	}
	for _, n := range w.names {
		if hosts[wire.ClusterHost(n)] {
			out = append(out, n)
		}
	}
	return out
}

// generated is one generation of a subscription.
type generated struct {
	pc     *push.PushContext
	res    []*wire.Resource
	joined func(delta bool) mem.BufferSlice
}

// generate builds w's subscription (or only those names) from the
// current snapshot. ok is false when there is no snapshot yet or
// generation failed (recorded on w; the proxy keeps its last config).
func (c *conn) generate(w *sub, req *push.Request, only []string) (g generated, ok bool) {
	g.pc = c.s.snaps.Current()
	if g.pc == nil {
		return g, false // not ready: the first push will answer
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
	res, joined, err := c.s.build.Build(g.pc, w.typ, c.proxy, names, list, req)
	c.mu.Lock()
	if err != nil {
		w.genErr = err.Error()
	} else {
		w.genErr = ""
	}
	c.mu.Unlock()
	if err != nil {
		c.s.log.Error("generation failed; proxy keeps its last config", "proxy", c.proxy.ID, "type", w.typ.Short, "err", err)
		return g, false
	}
	g.res, g.joined = res, joined
	return g, true
}

// sendMsg sends a framed response for w and accounts for it.
func (c *conn) sendMsg(w *sub, m *wire.Msg) error {
	if err := c.write(m); err != nil {
		return err
	}
	size := m.Size()
	c.s.metrics.pushes.WithLabelValues(w.typ.Short).Inc()
	c.s.metrics.pushBytes.WithLabelValues(w.typ.Short).Add(float64(size))
	for _, r := range c.curRecs {
		r.sent(w.typ.Short, size)
	}
	c.s.slo.sent(c, w.typ.Short)
	return nil
}

// observeConvergence records change-to-ACK time once the response that
// carried a change is ACKed; c.mu is held.
func (c *conn) observeConvergence(w *sub) {
	if !w.pushStart.IsZero() {
		c.s.metrics.convergence.WithLabelValues(w.typ.Short).Observe(time.Since(w.pushStart).Seconds())
		w.pushStart = time.Time{}
	}
	if !w.awaitingAck {
		c.s.slo.acked(c, w.typ.Short, w.sentAt)
	}
}

// report hands a request of a type the server does not generate (an
// Istio health report, say) to the report hook.
func (c *conn) report(r Report) {
	c.s.metrics.requests.WithLabelValues("other", "report").Inc()
	if c.s.opts.OnReport == nil {
		c.s.log.Debug("request for a type baremesh does not serve", "proxy", c.proxy.ID, "type", r.TypeURL)
		return
	}
	c.s.opts.OnReport(c.proxy, r)
}
