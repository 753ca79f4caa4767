package xdsserver

import (
	"encoding/hex"
	"errors"
	"maps"
	"slices"
	"strconv"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

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
	ctx := stream.Context()
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	proxy, err := gen.ParseNode(first.GetNode())
	if err != nil {
		return status.Errorf(codes.InvalidArgument, "%v", err)
	}
	c := &conn{
		id: proxy.ID + "-" + strconv.FormatUint(s.nextID.Add(1), 10), s: s, proxy: proxy,
		connected: time.Now(), delta: stream, watches: map[string]*watch{}, kick: make(chan struct{}, 1),
	}
	if p, ok := peer.FromContext(ctx); ok {
		c.peer = p.Addr.String()
	}
	s.addConn(c)
	defer s.removeConn(c)
	defer func() { c.mu.Lock(); c.releaseSlotLocked(); c.mu.Unlock() }()
	log := s.log.With("proxy", proxy.ID, "peer", c.peer)
	log.Info("proxy connected (delta)", "type", proxy.Type, "proxyless", proxy.Proxyless, "namespace", proxy.Namespace)
	defer log.Info("proxy disconnected")

	reqs := make(chan *discovery.DeltaDiscoveryRequest, 1)
	recvErr := make(chan error, 1)
	go func() {
		for {
			r, err := stream.Recv()
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
	if err := c.onDeltaRequest(first); err != nil {
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
			if err := c.onDeltaRequest(r); err != nil {
				return err
			}
		case <-c.kick:
			if err := c.onPush(); err != nil {
				return err
			}
		}
	}
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
		w = &watch{typeURL: typeURL, known: map[string]string{}, rejected: map[string]string{}, inFlight: map[string]map[string]string{}}
		c.watches[typeURL] = w
		maps.Copy(w.known, r.GetInitialResourceVersions())
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
			c.settleSlotLocked()
			w.nacks++
			w.nack = &nack{Nonce: nonce, Version: w.sentVer, Message: r.GetErrorDetail().GetMessage(), At: time.Now()}
			for name, prev := range sent {
				w.rejected[name] = w.known[name]
				if prev == "" {
					delete(w.known, name)
				} else {
					w.known[name] = prev
				}
			}
			c.s.metrics.nacks.WithLabelValues(shortType(typeURL)).Inc()
			c.s.log.Warn("proxy rejected config (NACK); not resending it until the config changes",
				"proxy", c.proxy.ID, "type", shortType(typeURL), "error", r.GetErrorDetail().GetMessage())
		default:
			w.acks++
			w.ackedVer, w.ackedAt = w.sentVer, time.Now()
			if nonce == w.sentNonce {
				w.awaitingAck = false
				c.settleSlotLocked()
			}
			c.observeConvergence(w)
			c.s.metrics.requests.WithLabelValues(shortType(typeURL), "ack").Inc()
		}
	} else {
		w.requests++
		c.s.metrics.requests.WithLabelValues(shortType(typeURL), "request").Inc()
	}
	changed := first
	for _, n := range r.GetResourceNamesSubscribe() {
		if n == "*" {
			changed = changed || !w.wildcard
			w.wildcard = true
			continue
		}
		if i, found := slices.BinarySearch(w.names, n); !found {
			w.names = slices.Insert(w.names, i, n)
			changed = true
		}
	}
	for _, n := range r.GetResourceNamesUnsubscribe() {
		if n == "*" {
			w.wildcard = false
			changed = true
			continue
		}
		if i, found := slices.BinarySearch(w.names, n); found {
			w.names = slices.Delete(w.names, i, i+1)
			delete(w.known, n)
			changed = true
		}
	}
	c.mu.Unlock()
	if changed {
		return c.respondDelta(w, nil, first)
	}
	return nil
}

// respondDelta sends what the client lacks: resources whose version it
// does not hold (and did not reject), and removals. force answers even
// when there is nothing to send (a first request for a type).
func (c *conn) respondDelta(w *watch, req *push.Request, force bool) error {
	pc := c.s.snaps.Current()
	if pc == nil {
		return nil
	}
	c.acquireSlot()
	defer func() { c.mu.Lock(); c.settleSlotLocked(); c.mu.Unlock() }()
	c.mu.Lock()
	names := w.names
	if w.wildcard {
		names = nil
	}
	c.mu.Unlock()
	res, err := c.generate(pc, w.typeURL, names, req)
	c.mu.Lock()
	if err != nil {
		w.genErr = err.Error()
		c.mu.Unlock()
		c.s.log.Error("generation failed; proxy keeps its last config", "proxy", c.proxy.ID, "type", shortType(w.typeURL), "err", err)
		return nil
	}
	w.genErr = ""
	resp := &discovery.DeltaDiscoveryResponse{TypeUrl: w.typeURL, SystemVersionInfo: strconv.FormatUint(pc.Version, 10)}
	prev := map[string]string{}
	present := make(map[string]bool, len(res))
	w.have = make(map[string]*anypb.Any, len(res))
	for _, r := range res {
		w.have[r.name] = r.any
		present[r.name] = true
		v := hex.EncodeToString(r.sum[:8])
		if w.known[r.name] == v {
			continue
		}
		if rej, ok := w.rejected[r.name]; ok {
			if rej == v {
				continue // the same config it rejected: wait for a change
			}
			delete(w.rejected, r.name)
		}
		prev[r.name] = w.known[r.name]
		w.known[r.name] = v
		resp.Resources = append(resp.Resources, &discovery.Resource{Name: r.name, Version: v, Resource: r.any})
	}
	for name, v := range w.known {
		if present[name] {
			continue
		}
		// Gone: a wildcard client drops it; a named subscriber learns that
		// the resource it asked for no longer exists.
		if w.wildcard || slices.Contains(w.names, name) {
			resp.RemovedResources = append(resp.RemovedResources, name)
			prev[name] = v
		}
		delete(w.known, name)
	}
	slices.Sort(resp.RemovedResources)
	if len(resp.Resources) == 0 && len(resp.RemovedResources) == 0 && !force {
		c.mu.Unlock()
		return nil
	}
	w.nonce++
	resp.Nonce = strconv.Itoa(w.nonce)
	w.inFlight[resp.Nonce] = prev
	w.sentNonce, w.sentVer, w.sentAt = resp.Nonce, resp.SystemVersionInfo+"-"+resp.Nonce, time.Now()
	w.awaitingAck = true
	if len(w.rejected) == 0 {
		w.nack = nil
	}
	w.notePushStart(req)
	c.mu.Unlock()
	c.s.sendSem <- struct{}{}
	err = c.delta.Send(resp)
	<-c.s.sendSem
	if err != nil {
		return err
	}
	size := proto.Size(resp)
	c.s.metrics.pushes.WithLabelValues(shortType(w.typeURL)).Inc()
	c.s.metrics.pushBytes.WithLabelValues(shortType(w.typeURL)).Add(float64(size))
	for _, r := range c.curRecs {
		r.sent(shortType(w.typeURL), size)
	}
	return nil
}
