package parity

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"
)

// pushProbe is a sidecar's ADS stream to istiod that stays open across
// scenarios and counts the CDS responses it gets. istiod serves a new
// mesh config on /debug/mesh, and new configs on /debug/configz, at once
// but builds the push context a connecting proxy is given only in its
// next full push (after its debounce): a proxy connecting in between gets
// the old config (seen once in a full run: one route configuration short).
// That full push reaches every connected proxy, so a response counted
// after the change shows the new push context is the one in force.
type pushProbe struct {
	n      atomic.Int64
	cancel context.CancelFunc
}

// startProbe connects the probe to istiod's plaintext ADS port and waits
// for its first response.
func startProbe(t *testing.T, addr string) *pushProbe {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(256<<20)))
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := discoveryv3.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(ctx)
	must(t, err)
	node := &corev3.Node{Id: "sidecar~10.10.250.1~push-probe.parity~parity.svc.cluster.local", Metadata: &structpb.Struct{Fields: map[string]*structpb.Value{
		"NAMESPACE": structpb.NewStringValue("parity"), "ISTIO_VERSION": structpb.NewStringValue("1.31.0"),
	}}}
	p := &pushProbe{cancel: func() { cancel(); cc.Close() }}
	must(t, stream.Send(&discoveryv3.DiscoveryRequest{Node: node, TypeUrl: typeURLs[CDS]}))
	go func() {
		for {
			r, err := stream.Recv()
			if err != nil {
				return
			}
			p.n.Add(1)
			// ACK, so istiod keeps pushing to the stream.
			if stream.Send(&discoveryv3.DiscoveryRequest{Node: node, TypeUrl: r.GetTypeUrl(), VersionInfo: r.GetVersionInfo(), ResponseNonce: r.GetNonce()}) != nil {
				return
			}
		}
	}()
	p.waitBeyond(t, 0, "its first response")
	return p
}

// settle waits until the probe has had more than n responses, for at most
// first, and then until no response came for quiet: unlike waitBeyond it
// does not fail when no push comes.
func (p *pushProbe) settle(n int64, first, quiet time.Duration) {
	for deadline := time.Now().Add(first); p.n.Load() <= n && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond) // polling a counter, not synchronisation
	}
	if p.n.Load() <= n {
		return
	}
	for last, since := p.n.Load(), time.Now(); time.Since(since) < quiet; {
		time.Sleep(20 * time.Millisecond) // polling a counter, not synchronisation
		if cur := p.n.Load(); cur != last {
			last, since = cur, time.Now()
		}
	}
}

// waitBeyond waits until the probe has had more than n responses.
func (p *pushProbe) waitBeyond(t *testing.T, n int64, what string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for p.n.Load() <= n {
		if time.Now().After(deadline) {
			t.Fatalf("istiod's push probe: no response after 60s waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond) // polling a counter, not synchronisation
	}
}
