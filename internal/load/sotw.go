package load

import (
	"context"
	"errors"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
)

// runSotW serves one State of the World ADS stream. On a reconnect it
// asks again for what it holds, with the versions it last accepted;
// nonces belong to a stream and start empty.
func (p *proxy) runSotW(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := p.cc.NewStream(ctx, &discovery.AggregatedDiscoveryService_ServiceDesc.Streams[0],
		discovery.AggregatedDiscoveryService_StreamAggregatedResources_FullMethodName, codecOption)
	if err != nil {
		return err
	}
	first := true
	send := func(r *sotwRequest) error {
		if first {
			r.node, first = p.nodeWire, false
		}
		return stream.SendMsg(r)
	}
	for _, t := range []Type{Cluster, Listener, Endpoint, Route} {
		s := &p.st[t]
		s.nonce, s.asked = "", false
		if !t.wildcard() && s.names.len() == 0 {
			continue
		}
		s.asked = true
		if err := send(&sotwRequest{typeURL: t.URL(), version: s.version, names: s.names}); err != nil {
			return err
		}
	}
	p.connected()
	var resp response
	for {
		if err := stream.RecvMsg(&resp); err != nil {
			return err
		}
		err := p.onSotW(&resp, send)
		resp.release()
		if err != nil {
			return err
		}
	}
}

// onSotW applies a response, ACKs or NACKs it, and follows new cluster
// and listener references with EDS and RDS subscriptions.
func (p *proxy) onSotW(resp *response, send func(*sotwRequest) error) error {
	t, ok := typeOf(resp.typeURL)
	if !ok {
		return nil // a type Envoy never asked for
	}
	p.received(t, resp.size())
	s := &p.st[t]
	s.nonce = resp.nonce
	// Listeners and clusters come whole; endpoints and routes may come
	// one by one, and Envoy ignores what it did not ask for.
	set, err := p.f.in.apply(t, s.set, resp, t.wildcard())
	if errors.Is(err, errMalformed) {
		return err
	}
	if err != nil {
		p.nacked()
		return send(&sotwRequest{typeURL: t.URL(), version: s.version, nonce: s.nonce, names: s.names, err: err})
	}
	if !t.wildcard() {
		set = p.f.in.keepOnly(set, s.names)
	}
	s.set, s.version = set, resp.version
	if err := send(&sotwRequest{typeURL: t.URL(), version: s.version, nonce: s.nonce, names: s.names}); err != nil {
		return err
	}
	p.publish(t, time.Now())
	switch t {
	case Cluster:
		return p.resubscribeSotW(Endpoint, set.depList(), send)
	case Listener:
		return p.resubscribeSotW(Route, set.depList(), send)
	}
	return nil
}

// resubscribeSotW asks for exactly names of t (EDS or RDS), with the
// last version and nonce of t, as Envoy does after a CDS or LDS update.
func (p *proxy) resubscribeSotW(t Type, names *nameList, send func(*sotwRequest) error) error {
	s := &p.st[t]
	if names.equal(s.names) && (s.asked || names.len() == 0) {
		s.names = names // the same names: later checks compare pointers
		return nil
	}
	s.names = names
	if kept := p.f.in.keepOnly(s.set, names); kept != s.set {
		s.set = kept
		p.publish(t, time.Time{})
	}
	if names.len() == 0 && !s.asked {
		return nil // an empty first request would mean "everything"
	}
	s.asked = true
	return send(&sotwRequest{typeURL: t.URL(), version: s.version, nonce: s.nonce, names: names})
}
