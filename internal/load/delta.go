package load

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
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
	stream, err := discovery.NewAggregatedDiscoveryServiceClient(p.cc).DeltaAggregatedResources(ctx)
	if err != nil {
		return err
	}
	first := true
	send := func(r *discovery.DeltaDiscoveryRequest) error {
		if first {
			r.Node, first = p.node, false
		}
		return stream.Send(r)
	}
	for _, t := range []Type{Cluster, Listener, Endpoint, Route} {
		s := &p.st[t]
		s.nonce, s.asked = "", false
		r := &discovery.DeltaDiscoveryRequest{TypeUrl: t.URL(), InitialResourceVersions: s.set.versions()}
		if t.wildcard() {
			r.ResourceNamesSubscribe = []string{"*"}
		} else if len(s.names) > 0 {
			r.ResourceNamesSubscribe = s.names
		} else {
			continue
		}
		s.asked = true
		if err := send(r); err != nil {
			return err
		}
	}
	p.connected()
	for {
		resp, err := stream.Recv()
		if err != nil {
			return err
		}
		if err := p.onDelta(resp, send); err != nil {
			return err
		}
	}
}

func (p *proxy) onDelta(resp *discovery.DeltaDiscoveryResponse, send func(*discovery.DeltaDiscoveryRequest) error) error {
	t, ok := typeOf(resp.GetTypeUrl())
	if !ok {
		return nil
	}
	p.received(t, proto.Size(resp))
	s := &p.st[t]
	s.nonce = resp.GetNonce()
	rs := resp.GetResources()
	anys, names, versions := make([]*anypb.Any, len(rs)), make([]string, len(rs)), make([]string, len(rs))
	var err error
	for i, r := range rs {
		anys[i], names[i], versions[i] = r.GetResource(), r.GetName(), r.GetVersion()
		if names[i] == "" && r.GetResource() != nil {
			err = errors.New("delta resource without a name")
		}
	}
	var put map[string]entry
	if err == nil {
		put, err = p.collect(t, anys, names, versions)
	}
	if err == nil {
		for n, e := range put {
			if e.res.Name != n {
				err = fmt.Errorf("resource named %q holds %q", n, e.res.Name)
				break
			}
		}
	}
	if err != nil {
		p.nacked()
		return send(&discovery.DeltaDiscoveryRequest{
			TypeUrl: t.URL(), ResponseNonce: s.nonce,
			ErrorDetail: &statuspb.Status{Code: int32(codes.InvalidArgument), Message: err.Error()},
		})
	}
	set := p.f.in.update(t, s.set, put, resp.GetRemovedResources(), false)
	if !t.wildcard() {
		set = p.f.in.keepOnly(set, s.names)
	}
	s.set, s.version = set, resp.GetSystemVersionInfo()
	if err := send(&discovery.DeltaDiscoveryRequest{TypeUrl: t.URL(), ResponseNonce: s.nonce}); err != nil {
		return err
	}
	p.publish(t, time.Now())
	switch t {
	case Cluster:
		return p.resubscribeDelta(Endpoint, set.Deps(), send)
	case Listener:
		return p.resubscribeDelta(Route, set.Deps(), send)
	}
	return nil
}

// resubscribeDelta sends what changed in t's subscription, and forgets
// the resources unsubscribed from (the server need not confirm those).
func (p *proxy) resubscribeDelta(t Type, names []string, send func(*discovery.DeltaDiscoveryRequest) error) error {
	s := &p.st[t]
	add, del := diff(s.names, names)
	if len(add) == 0 && len(del) == 0 {
		return nil
	}
	s.names = names
	if kept := p.f.in.keepOnly(s.set, names); kept != s.set {
		s.set = kept
		p.publish(t, time.Time{})
	}
	s.asked = true
	return send(&discovery.DeltaDiscoveryRequest{TypeUrl: t.URL(), ResourceNamesSubscribe: add, ResourceNamesUnsubscribe: del})
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
