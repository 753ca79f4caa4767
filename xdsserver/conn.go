package xdsserver

import (
	"context"
	"errors"
	"hash/maphash"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unique"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/push"
	"github.com/baremesh/baremesh/xdsserver/gen"
)

var errUnimplemented = status.Error(codes.Unimplemented, "baremesh serves Delta xDS on ADS only")

type sotwStream = grpc.BidiStreamingServer[discovery.DiscoveryRequest, discovery.DiscoveryResponse]

// pushOrder is the order types are pushed in: clusters before their
// endpoints, listeners before their routes, as Envoy's xDS docs advise.
var pushOrder = []string{gen.ClusterType, gen.EndpointType, gen.ListenerType, gen.RouteType}

// conn is one xDS stream. Its loop goroutine owns sending; mu guards what
// debug handlers read.
type conn struct {
	id        string
	s         *Server
	proxy     *gen.Proxy
	peer      string
	connected time.Time
	stream    sotwStream
	delta     deltaStream // set instead of stream for Delta xDS

	mu      sync.Mutex
	watches map[string]*watch
	pending *push.Request
	recs    []*pushRecord // the pushes merged into pending
	kick    chan struct{}
	// curRecs are the pushes being handled; only the loop goroutine
	// touches it.
	curRecs []*pushRecord
}

// watch is the state of one type on one connection.
type watch struct {
	typeURL  string
	names    []string  // sorted; nil for a wildcard subscription
	list     *nameList // owns names, shared with other connections
	wildcard bool

	nonce     int
	sentNonce string
	sentVer   string
	sentHash  uint64 // LDS, CDS: of the whole set (setSum)
	sentAt    time.Time
	// held is what the proxy holds, sorted by name (encode sorts every
	// generation) and shared with every other proxy that holds the same
	// resources: for EDS, RDS and Delta the items of heldList, for SotW
	// LDS and CDS the generated (cached) set.
	held     []*encoded
	heldList *heldList
	// rejected: per resource, the version the proxy NACKed (EDS, RDS,
	// Delta); last: the last SotW EDS or RDS response, to roll back on its
	// NACK.
	rejected   map[string][32]byte
	last       sentResp
	ackedVer   string
	ackedAt    time.Time
	nack       *nack
	nackedHash uint64
	genErr     string
	// counts of what the client sent, for syncz and tests
	requests, acks, nacks int
	// pushStart is when the change behind the unACKed response happened,
	// for the convergence histogram.
	pushStart time.Time
	// awaitingAck: a response was sent and neither ACKed nor NACKed yet.
	awaitingAck bool

	// Delta xDS only: versions the client said it holds when it
	// (re)connected, and each unACKed response by nonce.
	initial  map[string]string
	inFlight map[string]sentResp
}

// sentResp is what a response of a named type (EDS, RDS, Delta) sent and
// removed, and what the proxy held before it, to roll back on its NACK.
// Held lists are never altered in place, so keeping prev costs nothing.
type sentResp struct {
	sent    []*encoded
	removed []string
	prev    []*encoded
}

// rollback undoes r on its NACK: what it sent is marked rejected, and the
// proxy holds again what it held before r, unless a later response
// replaced it since. c.mu is held.
func (w *watch) rollback(r sentResp, lists *heldLists) {
	if w.rejected == nil {
		w.rejected = map[string][32]byte{}
	}
	var back []*encoded
	drop := map[string]bool{}
	restore := func(name string) {
		if old := findHeld(r.prev, name); old != nil {
			back = append(back, old)
		} else {
			drop[name] = true
		}
	}
	for _, e := range r.sent {
		w.rejected[e.name] = e.sum
		if findHeld(w.held, e.name) == e {
			restore(e.name)
		}
	}
	for _, name := range r.removed {
		if findHeld(w.held, name) == nil {
			restore(name)
		}
	}
	w.hold(lists, back, drop)
}

// hold makes w hold what it holds with each of set replacing or adding
// the entry of its name and each name in drop removed, as a shared list
// (heldlists.go). c.mu is held.
func (w *watch) hold(lists *heldLists, set []*encoded, drop map[string]bool) {
	w.heldList = lists.with(w.heldList, set, drop)
	w.held = w.heldList.items
}

type nack struct {
	Nonce   string    `json:"nonce"`
	Version string    `json:"version"`
	Message string    `json:"message"`
	At      time.Time `json:"at"`
}

func (s *Server) serve(stream sotwStream, fixedType string) error {
	names := resolver{shared: &s.lists}
	recv := func() (*sotwRequest, error) {
		r := new(sotwRequest)
		if err := stream.RecvMsg(r); err != nil { // our codec decodes a sotwRequest (decode.go)
			return nil, err
		}
		if r.buf == nil {
			r.summarise() // decoded by the proto runtime or another codec
		}
		if err := names.resolve(r); err != nil {
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
		return r, nil
	}
	first, err := recv()
	if err != nil {
		return err
	}
	return serveConn(s, stream.Context(), first.GetNode(), func(c *conn) { c.stream = stream },
		first, recv, func(c *conn, r *sotwRequest) error { return c.onRequest(r, fixedType) })
}

// serveConn runs one connection, SotW or Delta: it parses the node of
// the first request, registers the connection, and loops over requests
// (read on their own goroutine) and pushes until the stream ends. attach
// sets the stream on the new connection.
func serveConn[R any](s *Server, ctx context.Context, node *corev3.Node, attach func(*conn), first R,
	recv func() (R, error), on func(*conn, R) error) error {
	proxy, err := gen.ParseNode(node)
	if err != nil {
		return status.Errorf(codes.InvalidArgument, "%v", err)
	}
	c := &conn{
		id: proxy.ID + "-" + strconv.FormatUint(s.nextID.Add(1), 10), s: s, proxy: proxy,
		connected: time.Now(), watches: map[string]*watch{}, kick: make(chan struct{}, 1),
	}
	attach(c)
	if p, ok := peer.FromContext(ctx); ok {
		c.peer = p.Addr.String()
	}
	s.addConn(c)
	defer s.removeConn(c)
	log := s.log.With("proxy", proxy.ID, "peer", c.peer)
	log.Info("proxy connected", "type", proxy.Type, "proxyless", proxy.Proxyless, "namespace", proxy.Namespace, "delta", c.delta != nil)
	defer log.Info("proxy disconnected")

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
	if err := on(c, first); err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-recvErr:
			if errors.Is(err, ctx.Err()) || status.Code(err) == codes.Canceled {
				return nil
			}
			return err
		case r := <-reqs:
			if err := on(c, r); err != nil {
				return err
			}
		case <-c.kick:
			if err := c.onPush(); err != nil {
				return err
			}
		}
	}
}

func (c *conn) enqueue(req *push.Request, rec *pushRecord) {
	c.mu.Lock()
	c.pending = c.pending.Merge(req)
	if rec != nil {
		c.recs = append(c.recs, rec)
	}
	c.mu.Unlock()
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// onRequest tells an initial request, an ACK, a NACK and a stale
// response apart and acts on each.
func (c *conn) onRequest(r *sotwRequest, fixedType string) error {
	// The type URL is kept by the watch: interned (the resolver already
	// did it for requests our codec decoded).
	typeURL := unique.Make(r.GetTypeUrl()).Value()
	if typeURL == "" {
		typeURL = fixedType
	}
	if fixedType != "" && typeURL != fixedType {
		return status.Errorf(codes.InvalidArgument, "type %q requested on the %s service", typeURL, fixedType)
	}
	if _, ok := c.s.opts.Generators[typeURL]; !ok {
		c.s.log.Debug("request for a type baremesh does not serve", "proxy", c.proxy.ID, "type", typeURL)
		return nil
	}
	c.mu.Lock()
	w := c.watches[typeURL]
	if w == nil {
		w = &watch{typeURL: typeURL}
		c.watches[typeURL] = w
	}
	nonce := r.GetResponseNonce()
	if nonce != "" && nonce != w.sentNonce {
		c.mu.Unlock()
		c.s.metrics.requests.WithLabelValues(shortType(typeURL), "stale").Inc()
		return nil // stale: the client has not seen our latest response yet
	}
	namesChanged := w.setNames(r, &c.s.held)
	// A changed subscription of EDS or RDS is answered with the resources
	// the proxy lacks; LDS and CDS are always sent whole.
	var only []string
	if namesChanged && nonce != "" && incremental(typeURL) && !w.wildcard {
		only = w.unheld()
	}
	switch {
	case nonce == "":
		w.requests++
		c.mu.Unlock()
		c.s.metrics.requests.WithLabelValues(shortType(typeURL), "request").Inc()
		return c.respond(w, nil, true, nil) // initial request, or a reconnect
	case r.GetErrorDetail() != nil:
		w.awaitingAck = false
		w.nacks++
		w.nack = &nack{Nonce: w.sentNonce, Version: w.sentVer, Message: strings.Clone(r.GetErrorDetail().GetMessage()), At: time.Now()}
		w.rejectLast(&c.s.held)
		w.ackedVer = strings.Clone(r.GetVersionInfo())
		c.mu.Unlock()
		c.s.metrics.nacks.WithLabelValues(shortType(typeURL)).Inc()
		c.s.log.Warn("proxy rejected config (NACK); not resending it until the config changes",
			"proxy", c.proxy.ID, "type", shortType(typeURL), "version", w.sentVer, "error", r.GetErrorDetail().GetMessage())
		if namesChanged && (only == nil || len(only) > 0) {
			return c.respond(w, nil, false, only)
		}
		return nil
	default:
		w.acks++
		w.ackedVer, w.ackedAt = strings.Clone(r.GetVersionInfo()), time.Now()
		w.awaitingAck, w.last = false, sentResp{}
		c.observeConvergence(w)
		c.mu.Unlock()
		c.s.metrics.requests.WithLabelValues(shortType(typeURL), "ack").Inc()
		if namesChanged && (only == nil || len(only) > 0) {
			return c.respond(w, nil, false, only) // the subscription changed with the ACK
		}
		return nil
	}
}

// setNames records the subscription of r and reports whether it
// changed. An ACK repeats the whole subscription (thousands of EDS
// names); the stream's resolver made it a shared list, so an unchanged
// subscription is the same list.
func (w *watch) setNames(r *sotwRequest, lists *heldLists) bool {
	wildcard := r.list == nil
	if wildcard == w.wildcard && r.list == w.list && (wildcard || w.names != nil) {
		return false
	}
	w.wildcard = wildcard
	if wildcard {
		w.names, w.list = nil, nil
		return true
	}
	w.list = r.list
	w.names = w.list.names
	// The client forgets what it unsubscribed: a later subscription of
	// the same name must be answered with the resource again.
	if incremental(w.typeURL) {
		if drop := unsubscribed(w.held, w.names); drop != nil {
			w.hold(lists, nil, drop)
		}
		for name := range w.rejected {
			if _, ok := slices.BinarySearch(w.names, name); !ok {
				delete(w.rejected, name)
			}
		}
	}
	return true
}

// unsubscribed returns the names of held (sorted) not in names (sorted),
// or nil.
func unsubscribed(held []*encoded, names []string) map[string]bool {
	var out map[string]bool
	j := 0
	for _, e := range held {
		for j < len(names) && names[j] != e.name && names[j] < e.name {
			j++
		}
		if j == len(names) || names[j] != e.name {
			if out == nil {
				out = map[string]bool{}
			}
			out[e.name] = true
		}
	}
	return out
}

// unheld returns the names of w's subscription the proxy holds no
// resource for: after a subscription change of EDS or RDS only those
// need generating, the others are current (a pending push sends any that
// are not). c.mu is held.
func (w *watch) unheld() []string {
	n := 0
	w.eachUnheld(func(string) { n++ })
	switch n {
	case len(w.names):
		return w.names // none held: the whole (shared) list
	case 0:
		return []string{}
	}
	out := make([]string, 0, n)
	w.eachUnheld(func(name string) { out = append(out, name) })
	return out
}

// eachUnheld calls fn with each subscribed name not in held (both
// sorted); c.mu is held.
func (w *watch) eachUnheld(fn func(string)) {
	i := 0
	for _, name := range w.names {
		// Names are interned (encode.go): == is a pointer compare, and most
		// subscribed names are held.
		for i < len(w.held) && w.held[i].name != name && w.held[i].name < name {
			i++
		}
		if i == len(w.held) || w.held[i].name != name {
			fn(name)
		}
	}
}

// onPush handles the merged pending push. Work that cannot matter is
// skipped: an endpoint-only push regenerates only EDS, and in SotW only
// the clusters of the services whose endpoints changed (EDS is not a
// state-of-the-world type: a partial response leaves the others alone).
func (c *conn) onPush() error {
	c.mu.Lock()
	req, recs := c.pending, c.recs
	c.pending, c.recs = nil, nil
	c.mu.Unlock()
	if req == nil {
		return nil
	}
	ownWorkload := slices.ContainsFunc(c.proxy.IPs, func(ip string) bool { return req.Addresses[ip] })
	if !req.Full && ownWorkload {
		// The proxy's own workload changed: its inbound listeners and
		// clusters may change too.
		full := *req
		full.Full = true
		req = &full
	}
	defer func() {
		for _, r := range recs {
			r.finished()
		}
	}()
	c.curRecs = recs
	defer func() { c.curRecs = nil }()
	types := allTypes
	if req.Full && !ownWorkload {
		types = affectedTypes(c.s.snaps.Current(), c.proxy, req)
		if len(req.Endpoints) > 0 {
			types[gen.EndpointType] = true
		}
	}
	narrowEDS := !req.Full || (!ownWorkload && servicesOnly(req))
	for _, t := range pushOrder {
		if req.Full && !types[t] {
			continue // this push cannot change t for this proxy
		}
		if !req.Full && t != gen.EndpointType {
			continue
		}
		c.mu.Lock()
		w := c.watches[t]
		// Only the clusters of the services that changed can have new
		// endpoints, unless something like a DestinationRule changed.
		var only []string
		narrow := w != nil && t == gen.EndpointType && narrowEDS && !w.wildcard
		if narrow {
			only = edsNamesFor(w, req)
		}
		c.mu.Unlock()
		if w == nil || (narrow && len(only) == 0) {
			continue
		}
		var err error
		if c.delta != nil {
			err = c.respondDelta(w, req, false, only)
		} else {
			err = c.respond(w, req, false, only)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// servicesOnly reports whether a full push changed services and
// endpoints alone (no DestinationRule, Sidecar or mesh config).
func servicesOnly(req *push.Request) bool {
	if len(req.Reasons) > 0 && (req.Reasons["mesh"] > 0 || req.Reasons["initial"] > 0) {
		return false
	}
	for k := range req.Configs {
		if k.Kind != config.ServiceEntry && k.Kind != config.WorkloadEntry {
			return false
		}
	}
	return len(req.Services) > 0 || len(req.Endpoints) > 0
}

// edsNamesFor picks the subscribed cluster names of the services that
// changed or whose endpoints changed, through the shared list's host
// index when there is one.
func edsNamesFor(w *watch, req *push.Request) []string {
	var out []string
	if w.list != nil {
		for k := range req.Endpoints {
			out = append(out, w.list.clustersOf(k.Hostname)...)
		}
		for k := range req.Services {
			if !req.Endpoints[k] {
				out = append(out, w.list.clustersOf(k.Hostname)...)
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
		if hosts[clusterHost(n)] {
			out = append(out, n)
		}
	}
	return out
}

// clusterHost is the host of an "outbound|PORT|SUBSET|HOST" name (the text
// after the last '|'), without allocating: this runs for every
// subscribed cluster of every proxy on an endpoint push.
func clusterHost(name string) string {
	if i := strings.LastIndexByte(name, '|'); i >= 0 {
		return name[i+1:]
	}
	return ""
}

// notePushStart remembers when the change behind a response happened;
// c.mu is held.
func (w *watch) notePushStart(req *push.Request) {
	if req != nil && !req.Start.IsZero() && (w.pushStart.IsZero() || req.Start.Before(w.pushStart)) {
		w.pushStart = req.Start
	}
}

// observeConvergence records change-to-ACK time once the response that
// carried a change is ACKed; c.mu is held.
func (c *conn) observeConvergence(w *watch) {
	if !w.pushStart.IsZero() {
		c.s.metrics.convergence.WithLabelValues(shortType(w.typeURL)).Observe(time.Since(w.pushStart).Seconds())
		w.pushStart = time.Time{}
	}
}

func shortType(typeURL string) string {
	switch typeURL {
	case gen.ListenerType:
		return "lds"
	case gen.RouteType:
		return "rds"
	case gen.ClusterType:
		return "cds"
	case gen.EndpointType:
		return "eds"
	}
	return typeURL
}

// namesSeed makes namesHash stable for the life of the process (hashes
// are compared, never stored).
var namesSeed = maphash.MakeSeed()

// namesHash hashes a name list regardless of its order: the sum of the
// names' hashes, so a request's names are hashed as they are decoded,
// without sorting (decodeRequest).
func namesHash(names []string) uint64 {
	var sum uint64
	for _, n := range names {
		sum += maphash.String(namesSeed, n)
	}
	return sum
}
