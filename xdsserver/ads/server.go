// Package ads is the xDS protocol: the ADS state machine over gRPC, State
// of the World and Delta, as two variants (sotw.go, delta.go) over one
// subscription type (sub.go). It keeps one connection state per stream,
// tells requests, ACKs, NACKs and stale responses apart explicitly, and
// after a NACK sends nothing more for that resource until the config
// changes. Pushes come from the core push pipeline and are merged per
// connection, so a connection has at most one pending push. Connection
// hooks (Options) let controllers beside the server learn of connects,
// disconnects and reports, and refuse a stream.
//
// It imports core, xdsserver/gen, xdsserver/xdstype, xdsserver/wire and
// xdsserver/generation; never sources, and nothing imports it but the wiring
// and the debug pages.
package ads

import (
	"context"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/baremesh/baremesh/core/push"
	"github.com/baremesh/baremesh/xdsserver/generation"
	"github.com/baremesh/baremesh/xdsserver/wire"
	"github.com/baremesh/baremesh/xdsserver/xdstype"
)

// Snapshots gives the current snapshot, its endpoints pinned
// (PushContext.Pin). *push.Pipeline implements it.
type Snapshots interface {
	Current() *push.PushContext
}

// Options configure a Server.
type Options struct {
	// Types are the xDS types served; default xdstype.All.
	Types []*xdstype.Type
	// MaxConcurrentGeneration bounds how many connections generate at
	// once (not how many may connect); default 2×GOMAXPROCS.
	MaxConcurrentGeneration int
	// MaxConcurrentSends bounds responses being written at once; default
	// 64. gRPC's Send returns once most of a response is on the wire (its
	// per-stream write quota is 64 KB), and responses are made of buffers
	// shared by all proxies, so this also bounds what a connect storm
	// holds in per-proxy send buffers.
	MaxConcurrentSends int
	// SendTimeout ends a stream whose response is not accepted for that
	// long (the proxy does not read); default DefaultSendTimeout,
	// negative: none. SlowSend is how long a send holds its slot
	// (default DefaultSlowSend). MaxStreamsPerConnection and
	// MaxStreamsPerPeer cap open streams (defaults
	// DefaultMaxStreamsPerConnection and DefaultMaxStreamsPerPeer;
	// negative: no cap). See flow.go.
	SendTimeout time.Duration
	SlowSend    time.Duration
	// FirstRequestTimeout ends a stream that sends no request for that
	// long after it opens (default DefaultFirstRequestTimeout, negative:
	// none): the caps count streams that have sent one.
	FirstRequestTimeout     time.Duration
	MaxStreamsPerConnection int
	MaxStreamsPerPeer       int
	Logger                  *slog.Logger
	Registerer              prometheus.Registerer
	// NoCache turns the generation caches off. CacheAssert regenerates on every
	// cache hit and panics on a difference (default: the environment
	// variable BAREMESH_CACHE_ASSERT=1).
	NoCache     bool
	CacheAssert bool
	// OnCacheMismatch replaces the assertion's panic (for tests of the
	// assertion itself).
	OnCacheMismatch func(msg string)
	// ConvergenceSLO is the objective for a change's change→ACK time per
	// proxy; slower changes are counted (slo.go). Zero: none.
	ConvergenceSLO time.Duration

	Hooks
}

// Server is the xDS server.
type Server struct {
	discovery.UnimplementedAggregatedDiscoveryServiceServer
	opts    Options
	log     *slog.Logger
	snaps   Snapshots
	metrics *metrics
	build   *generation.Builder
	types   map[string]*xdstype.Type
	order   []*xdstype.Type // push order
	sendSem chan struct{}
	// slotWaiters counts the sends waiting for a send slot (flow.go).
	slotWaiters atomic.Int64
	// fanout wakes the connections for a push a few at a time.
	fanout *fanout
	// sendTimeout and slowSend: see Options and flow.go.
	sendTimeout, slowSend time.Duration
	caps                  streamCaps

	pushes pushLog
	slo    *sloTracker
	lists  wire.Lists
	held   wire.HeldLists

	mu     sync.RWMutex
	conns  map[string]*conn
	nextID atomic.Uint64
	opened atomic.Uint64 // streams served (registered), ever
	sends  atomic.Uint64 // responses sent, ever
}

// New returns a server over snaps.
func New(snaps Snapshots, opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.MaxConcurrentSends <= 0 {
		opts.MaxConcurrentSends = 64
	}
	if opts.Types == nil {
		opts.Types = xdstype.All
	}
	opts = guard(opts) // authz.go
	flowDefaults(&opts)
	s := &Server{
		opts: opts, log: opts.Logger, snaps: snaps, conns: map[string]*conn{},
		metrics: newMetrics(opts.Registerer), sendSem: make(chan struct{}, opts.MaxConcurrentSends),
		types: map[string]*xdstype.Type{}, order: xdstype.Sorted(opts.Types),
		sendTimeout: opts.SendTimeout, slowSend: opts.SlowSend, fanout: newFanout(),
		caps: streamCaps{perConn: opts.MaxStreamsPerConnection, perPeer: opts.MaxStreamsPerPeer, conns: map[string]int{}, peers: map[string]int{}},
	}
	for _, t := range opts.Types {
		s.types[t.URL] = t
	}
	s.metrics.zero(opts.Types)
	s.slo = newSLOTracker(opts.ConvergenceSLO, opts.Registerer)
	s.build = generation.New(generation.Options{MaxConcurrent: opts.MaxConcurrentGeneration, NoCache: opts.NoCache,
		CacheAssert: opts.CacheAssert, OnCacheMismatch: opts.OnCacheMismatch, GenTime: s.metrics.genTime})
	return s
}

// Builder is the server's generation stage (for tests and debug pages).
func (s *Server) Builder() *generation.Builder { return s.build }

// Register adds ADS and each type's own discovery service to g.
func (s *Server) Register(g *grpc.Server) {
	discovery.RegisterAggregatedDiscoveryServiceServer(g, s)
	for _, t := range s.order {
		if t.Service != nil {
			g.RegisterService(s.typedService(t), nil)
		}
	}
}

var errUnimplemented = status.Error(codes.Unimplemented, "baremesh serves Delta xDS on ADS only")

// typedService is t's own discovery service (LDS, RDS, CDS, EDS): its
// SotW stream serves t alone; its Delta stream and Fetch call are
// unimplemented.
func (s *Server) typedService(t *xdstype.Type) *grpc.ServiceDesc {
	d := *t.Service
	d.HandlerType = nil // no handler object: the handlers below close over s
	d.Streams = make([]grpc.StreamDesc, len(t.Service.Streams))
	for i, sd := range t.Service.Streams {
		sd.Handler = func(_ any, st grpc.ServerStream) error { return errUnimplemented }
		if sd.ServerStreams && sd.ClientStreams && len(sd.StreamName) > 6 && sd.StreamName[:6] == "Stream" {
			sd.Handler = func(_ any, st grpc.ServerStream) error {
				return s.serveSotW(&grpc.GenericServerStream[discovery.DiscoveryRequest, discovery.DiscoveryResponse]{ServerStream: st}, t)
			}
		}
		d.Streams[i] = sd
	}
	d.Methods = make([]grpc.MethodDesc, len(t.Service.Methods))
	for i, md := range t.Service.Methods {
		md.Handler = func(any, context.Context, func(any) error, grpc.UnaryServerInterceptor) (any, error) {
			return nil, errUnimplemented
		}
		d.Methods[i] = md
	}
	return &d
}

// OnPush is the pipeline listener: it queues req on every connection.
func (s *Server) OnPush(_ *push.PushContext, req *push.Request) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	rec := s.pushes.add(req, len(s.conns))
	for _, c := range s.conns {
		s.slo.enqueued(c, rec, req.Start)
		c.enqueue(req, rec)
	}
}

func (s *Server) addConn(c *conn) {
	s.mu.Lock()
	s.conns[c.id] = c
	n := len(s.conns)
	s.mu.Unlock()
	s.opened.Add(1)
	s.slo.connected(c)
	s.metrics.connected.Set(float64(n))
}

func (s *Server) removeConn(c *conn) {
	s.mu.Lock()
	delete(s.conns, c.id)
	n := len(s.conns)
	s.mu.Unlock()
	s.slo.disconnected(c)
	s.metrics.connected.Set(float64(n))
}

// connsSorted returns the current connections sorted by ID.
func (s *Server) connsSorted() []*conn {
	s.mu.RLock()
	out := make([]*conn, 0, len(s.conns))
	for _, c := range s.conns {
		out = append(out, c)
	}
	s.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

// Opened returns how many streams the server has served since it
// started.
func (s *Server) Opened() uint64 { return s.opened.Load() }

// Sends returns how many responses the server has started to send since
// it started.
func (s *Server) Sends() uint64 { return s.sends.Load() }

// Connected returns the number of open streams.
func (s *Server) Connected() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.conns)
}
