package load

import (
	"context"
	"slices"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

type sotwClient = discovery.AggregatedDiscoveryService_StreamAggregatedResourcesClient

// runSotW serves one State of the World ADS stream. On a reconnect it
// asks again for what it holds, with the versions it last accepted;
// nonces belong to a stream and start empty.
func (p *proxy) runSotW(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := discovery.NewAggregatedDiscoveryServiceClient(p.cc).StreamAggregatedResources(ctx)
	if err != nil {
		return err
	}
	first := true
	send := func(r *discovery.DiscoveryRequest) error {
		if first {
			r.Node, first = p.node, false
		}
		return stream.Send(r)
	}
	for _, t := range []Type{Cluster, Listener, Endpoint, Route} {
		s := &p.st[t]
		s.nonce, s.asked = "", false
		if !t.wildcard() && len(s.names) == 0 {
			continue
		}
		s.asked = true
		if err := send(&discovery.DiscoveryRequest{TypeUrl: t.URL(), VersionInfo: s.version, ResourceNames: s.names}); err != nil {
			return err
		}
	}
	p.connected()
	for {
		resp, err := stream.Recv()
		if err != nil {
			return err
		}
		if err := p.onSotW(resp, send); err != nil {
			return err
		}
	}
}

// onSotW applies a response, ACKs or NACKs it, and follows new cluster
// and listener references with EDS and RDS subscriptions.
func (p *proxy) onSotW(resp *discovery.DiscoveryResponse, send func(*discovery.DiscoveryRequest) error) error {
	t, ok := typeOf(resp.GetTypeUrl())
	if !ok {
		return nil // a type Envoy never asked for
	}
	p.received(t, proto.Size(resp))
	s := &p.st[t]
	s.nonce = resp.GetNonce()
	put, err := p.collect(t, resp.GetResources(), nil, nil)
	if err != nil {
		p.nacked()
		return send(&discovery.DiscoveryRequest{
			TypeUrl: t.URL(), VersionInfo: s.version, ResponseNonce: s.nonce, ResourceNames: s.names,
			ErrorDetail: &statuspb.Status{Code: int32(codes.InvalidArgument), Message: err.Error()},
		})
	}
	// Listeners and clusters come whole; endpoints and routes may come
	// one by one, and Envoy ignores what it did not ask for.
	set := p.f.in.update(t, s.set, put, nil, t.wildcard())
	// The set holds only subscribed names; filter again only if this
	// response brought a name we did not ask for (Envoy ignores those).
	if !t.wildcard() && !allSubscribed(put, s.names) {
		set = p.f.in.keepOnly(set, s.names)
	}
	s.set, s.version = set, resp.GetVersionInfo()
	if err := send(&discovery.DiscoveryRequest{TypeUrl: t.URL(), VersionInfo: s.version, ResponseNonce: s.nonce, ResourceNames: s.names}); err != nil {
		return err
	}
	p.publish(t, time.Now())
	switch t {
	case Cluster:
		return p.resubscribeSotW(Endpoint, set.Deps(), send)
	case Listener:
		return p.resubscribeSotW(Route, set.Deps(), send)
	}
	return nil
}

// resubscribeSotW asks for exactly names of t (EDS or RDS), with the
// last version and nonce of t, as Envoy does after a CDS or LDS update.
func (p *proxy) resubscribeSotW(t Type, names []string, send func(*discovery.DiscoveryRequest) error) error {
	s := &p.st[t]
	if slices.Equal(names, s.names) && (s.asked || len(names) == 0) {
		return nil
	}
	s.names = names
	if kept := p.f.in.keepOnly(s.set, names); kept != s.set {
		s.set = kept
		p.publish(t, time.Time{})
	}
	if len(names) == 0 && !s.asked {
		return nil // an empty first request would mean "everything"
	}
	s.asked = true
	return send(&discovery.DiscoveryRequest{TypeUrl: t.URL(), VersionInfo: s.version, ResponseNonce: s.nonce, ResourceNames: names})
}

// allSubscribed reports whether every name of put is in names (sorted).
func allSubscribed(put map[string]entry, names []string) bool {
	for n := range put {
		if _, ok := slices.BinarySearch(names, n); !ok {
			return false
		}
	}
	return true
}
