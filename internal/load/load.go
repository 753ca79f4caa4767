// Package load simulates a fleet of Envoy sidecars against any ADS
// server, to measure how fast a control plane configures them and
// follows changes.
//
// Each simulated proxy has its own ADS stream (State of the World or
// Delta) and an Istio sidecar node ID. Like Envoy it subscribes to all
// clusters and listeners, then to the EDS names of the EDS clusters and
// the RDS names of the HttpConnectionManagers it received, and ACKs or
// NACKs every response. It records when it connected, first received
// each type, last received and last ACKed; Fleet.Expect waits until
// every proxy has ACKed a state that satisfies a predicate.
//
// Proxies that receive the same bytes share the decoded resources and
// the sets holding them (see Set), so 2,000 proxies of one config cost
// little more memory than one, and little more CPU: a proxy reads a
// response with the package's own codec (one copy, no protobuf message
// per resource), the first proxy to apply a response to a set decodes
// it and the others look the result up (see interner.apply), and an ACK
// reuses the encoding of the name list it shares with the other proxies.
// The load client runs on the machine of the server it measures, so
// what it spends is taken from the server.
//
// It talks to the control plane over the wire only and imports no
// baremesh package.
package load

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// Mode is the xDS protocol variant.
type Mode string

// The modes.
const (
	SotW  Mode = "sotw"
	Delta Mode = "delta"
)

const maxMsg = 512 << 20

// Options configure a Fleet.
type Options struct {
	// Addr is the ADS server's HOST:PORT (plaintext gRPC).
	Addr string
	// Proxies is how many sidecars to simulate.
	Proxies int
	// Mode is SotW (default) or Delta.
	Mode Mode
	// StreamsPerConn is how many proxy streams share one gRPC connection
	// (default 100): 2,000 proxies make 20 TCP connections, not 2,000.
	StreamsPerConn int
	// Namespace of the proxies (default "default").
	Namespace string
	// DialOptions are added to the defaults (insecure, large messages and
	// flow-control windows).
	DialOptions []grpc.DialOption
}

// Fleet is a running set of simulated proxies. Its methods are safe for
// concurrent use.
type Fleet struct {
	opts    Options
	in      *interner
	proxies []*proxy
	conns   []*grpc.ClientConn
	started time.Time
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	bytes     [numTypes]atomic.Int64
	responses [numTypes]atomic.Int64

	waiters atomic.Pointer[[]*Waiter]
	wmu     sync.Mutex // serialises changes to waiters

	errOnce sync.Once
	err     atomic.Pointer[error]
}

// Start connects opts.Proxies proxies at once and returns without
// waiting for them; Stop ends them.
func Start(ctx context.Context, opts Options) (*Fleet, error) {
	if opts.Proxies <= 0 {
		return nil, fmt.Errorf("proxies: want at least 1, got %d", opts.Proxies)
	}
	if opts.Mode == "" {
		opts.Mode = SotW
	}
	if opts.Mode != SotW && opts.Mode != Delta {
		return nil, fmt.Errorf("mode %q: want sotw or delta", opts.Mode)
	}
	if opts.StreamsPerConn <= 0 {
		opts.StreamsPerConn = 100
	}
	if opts.Namespace == "" {
		opts.Namespace = "default"
	}
	dial := append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMsg)),
		// Fixed windows instead of BDP probing: 100 streams on a
		// connection each receive megabytes at once.
		grpc.WithInitialWindowSize(4 << 20),
		grpc.WithInitialConnWindowSize(64 << 20),
		grpc.WithReadBufferSize(256 << 10),
		bufferPoolOption,
	}, opts.DialOptions...)
	f := &Fleet{opts: opts, in: newInterner()}
	empty := []*Waiter{}
	f.waiters.Store(&empty)
	for i := 0; i < opts.Proxies; i += opts.StreamsPerConn {
		cc, err := grpc.NewClient(opts.Addr, dial...)
		if err != nil {
			f.closeConns()
			return nil, fmt.Errorf("dial %s: %w", opts.Addr, err)
		}
		f.conns = append(f.conns, cc)
	}
	ctx, f.cancel = context.WithCancel(ctx)
	f.started = time.Now()
	for i := range opts.Proxies {
		p := &proxy{f: f, idx: i, node: node(i, opts.Namespace), cc: f.conns[i/opts.StreamsPerConn]}
		p.rec.ID = p.node.GetId()
		var err error
		if p.nodeWire, err = proto.Marshal(p.node); err != nil {
			f.cancel()
			f.closeConns()
			return nil, fmt.Errorf("node %s: %w", p.rec.ID, err)
		}
		f.proxies = append(f.proxies, p)
	}
	for _, p := range f.proxies {
		f.wg.Add(1)
		go func() { defer f.wg.Done(); p.run(ctx) }()
	}
	return f, nil
}

// node is proxy i's Istio sidecar identity, with a unique IP in 10/8,
// described as Istio's agent (and pilot-load) describes istio-proxy: with
// ISTIO_VERSION, so it gets what istiod gives istio-proxy (telemetry
// filters, stat names) and the full push costs what it costs for a mesh
// of real sidecars.
func node(i int, ns string) *corev3.Node {
	ip := ProxyIP(i)
	name := fmt.Sprintf("load-%d", i)
	md, _ := structpb.NewStruct(map[string]any{
		"NAMESPACE": ns, "INSTANCE_IPS": ip, "WORKLOAD_NAME": name,
		"LABELS": map[string]any{"app": "load"}, "ISTIO_VERSION": "1.31.0",
		"CLUSTER_ID": "Kubernetes", "MESH_ID": "cluster.local", "SERVICE_ACCOUNT": "load",
	})
	return &corev3.Node{
		Id:       fmt.Sprintf("sidecar~%s~%s.%s~%s.svc.cluster.local", ip, name, ns, ns),
		Cluster:  name + "." + ns,
		Metadata: md,
	}
}

// ProxyIP is the IP of proxy i (from 0) of a fleet.
func ProxyIP(i int) string {
	n := i + 1
	return fmt.Sprintf("10.%d.%d.%d", (n>>16)&255, (n>>8)&255, n&255)
}

// Stop ends every stream and waits for the proxies to return.
func (f *Fleet) Stop() {
	f.cancel()
	f.wg.Wait()
	f.closeConns()
}

func (f *Fleet) closeConns() {
	for _, cc := range f.conns {
		_ = cc.Close()
	}
}

// Started is when the proxies started connecting.
func (f *Fleet) Started() time.Time { return f.started }

// Len is the number of proxies.
func (f *Fleet) Len() int { return len(f.proxies) }

// Conns is the number of gRPC connections the proxies share.
func (f *Fleet) Conns() int { return len(f.conns) }

// Err is the first error that stopped a proxy for good (the server
// refused the protocol or the node), or nil.
func (f *Fleet) Err() error {
	if e := f.err.Load(); e != nil {
		return *e
	}
	return nil
}

func (f *Fleet) fail(err error) {
	f.errOnce.Do(func() { f.err.Store(&err) })
	for _, w := range *f.waiters.Load() {
		w.wake()
	}
}

func (f *Fleet) count(t Type, n int) {
	f.bytes[t].Add(int64(n))
	f.responses[t].Add(1)
}

// Totals are the fleet's counters by Type.
type Totals struct {
	Bytes, Responses [numTypes]int64
	Nacks            int
	Reconnects       int
}

// Totals sums the counters of all proxies.
func (f *Fleet) Totals() Totals {
	var t Totals
	for i := range numTypes {
		t.Bytes[i], t.Responses[i] = f.bytes[i].Load(), f.responses[i].Load()
	}
	for _, p := range f.proxies {
		r := p.record()
		t.Nacks += r.Nacks
		t.Reconnects += r.Reconnects
	}
	return t
}

// Records returns a copy of every proxy's record.
func (f *Fleet) Records() []Record {
	out := make([]Record, len(f.proxies))
	for i, p := range f.proxies {
		out[i] = p.record()
	}
	return out
}

// View returns proxy i's ACKed state.
func (f *Fleet) View(i int) View { return f.proxies[i].view() }

// WaitConfigured waits until every proxy is configured (see
// Record.Configured) and returns each one's time from Started.
func (f *Fleet) WaitConfigured(ctx context.Context) (Latencies, error) {
	w := f.Expect(View.Configured)
	if err := w.Wait(ctx); err != nil {
		return nil, fmt.Errorf("configured: %w", err)
	}
	var out Latencies
	for _, r := range f.Records() {
		if r.Configured.IsZero() {
			return nil, errors.New("configured: a proxy satisfied the check before its record was updated")
		}
		out = append(out, r.Configured.Sub(f.started))
	}
	return out, nil
}
