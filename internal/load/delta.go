package load

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// runDelta serves one incremental (Delta) ADS stream, following the
// rules of Envoy's xDS protocol documentation ("Incremental xDS"):
//   - the first request of each wildcard type subscribes to "*";
//   - every response is ACKed or NACKed by its nonce alone;
//   - subscription changes are separate requests without a nonce, with
//     resource_names_subscribe / resource_names_unsubscribe;
//   - removed_resources deletes, and resources not named in a response
//     are kept;
//   - on a reconnect, initial_resource_versions names every resource
//     held with its version, and all subscriptions are sent again.
func (p *proxy) runDelta(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := p.cc.NewStream(ctx, &discovery.AggregatedDiscoveryService_ServiceDesc.Streams[1],
		discovery.AggregatedDiscoveryService_DeltaAggregatedResources_FullMethodName, codecOption)
	if err != nil {
		return err
	}
	first := true
	send := func(r *deltaRequest) error {
		if first {
			r.node, first = p.nodeWire, false
		}
		return stream.SendMsg(r)
	}
	for _, t := range []Type{Cluster, Listener, Endpoint, Route} {
		s := &p.st[t]
		s.nonce, s.asked = "", false
		r := &deltaRequest{typeURL: t.URL(), initial: s.set.versions()}
		if t.wildcard() {
			r.subscribe = wildcardNames
		} else if s.names.len() > 0 {
			r.subscribe = s.names
		} else {
			continue
		}
		s.asked = true
		if err := send(r); err != nil {
			return err
		}
	}
	p.connected()
	resp := response{delta: true}
	for {
		if err := stream.RecvMsg(&resp); err != nil {
			return err
		}
		err := p.onDelta(&resp, send)
		resp.release()
		if err != nil {
			return err
		}
	}
}

func (p *proxy) onDelta(resp *response, send func(*deltaRequest) error) error {
	t, ok := typeOf(resp.typeURL)
	if !ok {
		return nil
	}
	p.received(t, resp.size())
	s := &p.st[t]
	s.nonce = resp.nonce
	set, err := p.f.in.apply(t, s.set, resp, false)
	if errors.Is(err, errMalformed) {
		return err
	}
	if err != nil {
		p.nacked()
		return send(&deltaRequest{typeURL: t.URL(), nonce: s.nonce, err: err})
	}
	if !t.wildcard() {
		set = p.f.in.keepOnly(set, s.names)
	}
	s.set, s.version = set, resp.version
	if err := send(&deltaRequest{typeURL: t.URL(), nonce: s.nonce}); err != nil {
		return err
	}
	p.publish(t, time.Now())
	switch t {
	case Cluster:
		return p.resubscribeDelta(Endpoint, set.depList(), send)
	case Listener:
		return p.resubscribeDelta(Route, set.depList(), send)
	}
	return nil
}

// resubscribeDelta sends what changed in t's subscription, and forgets
// the resources unsubscribed from (the server need not confirm those).
func (p *proxy) resubscribeDelta(t Type, names *nameList, send func(*deltaRequest) error) error {
	s := &p.st[t]
	if names == s.names {
		return nil
	}
	add, del := diff(s.names.list(), names.list())
	if len(add) == 0 && len(del) == 0 {
		s.names = names // the same names: later checks compare pointers
		return nil
	}
	sub := newNameList(add)
	if len(add) == names.len() {
		sub = names // everything is new: the shared list and its encoding
	}
	s.names = names
	if kept := p.f.in.keepOnly(s.set, names); kept != s.set {
		s.set = kept
		p.publish(t, time.Time{})
	}
	s.asked = true
	return send(&deltaRequest{typeURL: t.URL(), subscribe: sub, unsubscribe: newNameList(del)})
}

// ErrUnsupported is returned by Probe when the server does not serve the
// mode.
var ErrUnsupported = errors.New("server does not serve this xDS mode")

// Probe opens one stream of mode to addr as a throwaway sidecar and
// waits for its first response. It returns an error wrapping
// ErrUnsupported when the server answers Unimplemented.
func Probe(ctx context.Context, addr string, mode Mode) error {
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMsg)))
	if err != nil {
		return err
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	node := &corev3.Node{Id: "sidecar~10.255.255.254~load-probe.default~default.svc.cluster.local"}
	c := discovery.NewAggregatedDiscoveryServiceClient(cc)
	if mode == Delta {
		st, err := c.DeltaAggregatedResources(ctx)
		if err == nil {
			// A Send error is io.EOF when the server has ended the
			// stream; Recv returns its status.
			_ = st.Send(&discovery.DeltaDiscoveryRequest{Node: node, TypeUrl: Cluster.URL(), ResourceNamesSubscribe: []string{"*"}})
			_, err = st.Recv()
		}
		return probeErr(err)
	}
	st, err := c.StreamAggregatedResources(ctx)
	if err == nil {
		_ = st.Send(&discovery.DiscoveryRequest{Node: node, TypeUrl: Cluster.URL()})
		_, err = st.Recv()
	}
	return probeErr(err)
}

func probeErr(err error) error {
	if status.Code(err) == codes.Unimplemented {
		return fmt.Errorf("%w: %v", ErrUnsupported, err)
	}
	return err
}
