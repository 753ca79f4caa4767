package mcp

import (
	"context"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
)

// stream is one ADS stream in one of the two protocol variants. send
// methods are called from one goroutine, recv from another.
type stream interface {
	// subscribe asks for typeURL; held is what is already held of it
	// (Delta sends it as initial_resource_versions).
	subscribe(typeURL string, held map[string]string) error
	recv() (*response, error)
	// ack ACKs r, or NACKs it when nack is not nil.
	ack(r *response, nack error) error
}

// openStream opens the variant the upstream is configured for.
func openStream(ctx context.Context, cc grpc.ClientConnInterface, delta bool, node *core.Node) (stream, error) {
	client := discovery.NewAggregatedDiscoveryServiceClient(cc)
	if delta {
		s, err := client.DeltaAggregatedResources(ctx)
		if err != nil {
			return nil, err
		}
		return &deltaStream{s: s, node: node}, nil
	}
	s, err := client.StreamAggregatedResources(ctx)
	if err != nil {
		return nil, err
	}
	return &sotwStream{s: s, node: node, acked: map[string]string{}}, nil
}

func errorDetail(err error) *status.Status {
	if err == nil {
		return nil
	}
	return &status.Status{Code: int32(codes.InvalidArgument), Message: err.Error()}
}

// sotwStream is state-of-the-world ADS: every response holds a type's
// whole state.
type sotwStream struct {
	s     discovery.AggregatedDiscoveryService_StreamAggregatedResourcesClient
	node  *core.Node
	sent  bool
	acked map[string]string // version last ACKed, by type URL
}

func (s *sotwStream) send(req *discovery.DiscoveryRequest) error {
	if !s.sent {
		req.Node, s.sent = s.node, true
	}
	return s.s.Send(req)
}

func (s *sotwStream) subscribe(typeURL string, _ map[string]string) error {
	return s.send(&discovery.DiscoveryRequest{TypeUrl: typeURL})
}

func (s *sotwStream) recv() (*response, error) {
	m, err := s.s.Recv()
	if err != nil {
		return nil, err
	}
	r := &response{typeURL: m.GetTypeUrl(), nonce: m.GetNonce(), version: m.GetVersionInfo(), full: true, items: make([]item, len(m.GetResources()))}
	for i, a := range m.GetResources() {
		r.items[i] = item{res: a}
	}
	return r, nil
}

func (s *sotwStream) ack(r *response, nack error) error {
	if nack == nil {
		s.acked[r.typeURL] = r.version
	}
	return s.send(&discovery.DiscoveryRequest{TypeUrl: r.typeURL, VersionInfo: s.acked[r.typeURL], ResponseNonce: r.nonce, ErrorDetail: errorDetail(nack)})
}

// deltaStream is incremental ADS: responses carry changed resources and
// the names removed.
type deltaStream struct {
	s    discovery.AggregatedDiscoveryService_DeltaAggregatedResourcesClient
	node *core.Node
	sent bool
}

func (s *deltaStream) send(req *discovery.DeltaDiscoveryRequest) error {
	if !s.sent {
		req.Node, s.sent = s.node, true
	}
	return s.s.Send(req)
}

func (s *deltaStream) subscribe(typeURL string, held map[string]string) error {
	// No names: a wildcard subscription. The versions held let the server
	// send only what differs after a reconnect.
	return s.send(&discovery.DeltaDiscoveryRequest{TypeUrl: typeURL, InitialResourceVersions: held})
}

func (s *deltaStream) recv() (*response, error) {
	m, err := s.s.Recv()
	if err != nil {
		return nil, err
	}
	r := &response{typeURL: m.GetTypeUrl(), nonce: m.GetNonce(), version: m.GetSystemVersionInfo(), removed: m.GetRemovedResources(), items: make([]item, len(m.GetResources()))}
	for i, res := range m.GetResources() {
		r.items[i] = item{name: res.GetName(), version: res.GetVersion(), res: res.GetResource()}
	}
	return r, nil
}

func (s *deltaStream) ack(r *response, nack error) error {
	return s.send(&discovery.DeltaDiscoveryRequest{TypeUrl: r.typeURL, ResponseNonce: r.nonce, ErrorDetail: errorDetail(nack)})
}
