// Package xdsserver serves xDS: ADS and the per-type discovery services
// over gRPC, State of the World (Delta comes with the push pipeline
// work). It keeps one connection state per stream, tells requests, ACKs
// and NACKs apart explicitly, and after a NACK sends nothing more for that
// type until the config changes. Pushes come from the core push pipeline
// and are merged per connection, so a connection has at most one pending
// push.
//
// It imports core and its own gen tree, never sources.
package xdsserver

import (
	"context"
	"log/slog"
	"os"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/service/cluster/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/service/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/service/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/service/route/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/baremesh/baremesh/core/push"
	"github.com/baremesh/baremesh/xdsserver/gen"
)

// Snapshots gives the current snapshot. *push.Pipeline implements it.
type Snapshots interface {
	Current() *push.PushContext
}

// Options configure a Server.
type Options struct {
	// Generators by type URL.
	Generators map[string]gen.Generator
	// MaxConcurrentGeneration bounds how many connections generate at
	// once (not how many may connect); default 2×GOMAXPROCS.
	MaxConcurrentGeneration int
	// MaxConcurrentSends bounds responses being written at once; default
	// 64. gRPC's Send returns once most of a response is on the wire (its
	// per-stream write quota is 64 KB), and responses are made of buffers
	// shared by all proxies, so this also bounds what a connect storm
	// holds in per-proxy send buffers.
	MaxConcurrentSends int
	Logger             *slog.Logger
	Registerer         prometheus.Registerer
	// NoCache turns the generation caches off. CacheAssert regenerates on every
	// cache hit and panics on a difference (default: the environment
	// variable BAREMESH_CACHE_ASSERT=1).
	NoCache     bool
	CacheAssert bool
	// OnCacheMismatch replaces the assertion's panic (for tests of the
	// assertion itself).
	OnCacheMismatch func(msg string)
}

// Server is the xDS server.
type Server struct {
	discovery.UnimplementedAggregatedDiscoveryServiceServer
	opts    Options
	log     *slog.Logger
	snaps   Snapshots
	metrics *metrics
	genSem  chan struct{}
	sendSem chan struct{}

	pushes   pushLog
	interned *interner
	lists    lists
	held     heldLists
	eds      *edsCache
	shapes   *shapeCache
	// assert: regenerate on cache hits and compare (cacheMismatch reports).
	assert        bool
	cacheMismatch func(msg string)

	mu     sync.RWMutex
	conns  map[string]*conn
	nextID atomic.Uint64
}

// New returns a server over snaps.
func New(snaps Snapshots, opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.MaxConcurrentGeneration <= 0 {
		opts.MaxConcurrentGeneration = 2 * runtime.GOMAXPROCS(0)
	}
	if opts.MaxConcurrentSends <= 0 {
		opts.MaxConcurrentSends = 64
	}
	s := &Server{
		opts: opts, log: opts.Logger, snaps: snaps, conns: map[string]*conn{},
		metrics: newMetrics(opts.Registerer), genSem: make(chan struct{}, opts.MaxConcurrentGeneration),
		sendSem:  make(chan struct{}, opts.MaxConcurrentSends),
		interned: newInterner(),
	}
	s.assert = opts.CacheAssert || os.Getenv("BAREMESH_CACHE_ASSERT") == "1"
	s.cacheMismatch = opts.OnCacheMismatch
	if s.cacheMismatch == nil {
		s.cacheMismatch = func(msg string) { panic(msg) }
	}
	if !opts.NoCache {
		s.eds, s.shapes = &edsCache{}, &shapeCache{}
	}
	return s
}

// Register adds ADS and the per-type services to g.
func (s *Server) Register(g *grpc.Server) {
	discovery.RegisterAggregatedDiscoveryServiceServer(g, s)
	listenerv3.RegisterListenerDiscoveryServiceServer(g, typed{s, gen.ListenerType})
	routev3.RegisterRouteDiscoveryServiceServer(g, typed{s, gen.RouteType})
	clusterv3.RegisterClusterDiscoveryServiceServer(g, typed{s, gen.ClusterType})
	endpointv3.RegisterEndpointDiscoveryServiceServer(g, typed{s, gen.EndpointType})
}

// OnPush is the pipeline listener: it queues req on every connection.
func (s *Server) OnPush(_ *push.PushContext, req *push.Request) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	rec := s.pushes.add(req, len(s.conns))
	for _, c := range s.conns {
		c.enqueue(req, rec)
	}
}

// StreamAggregatedResources implements ADS, State of the World.
func (s *Server) StreamAggregatedResources(stream grpc.BidiStreamingServer[discovery.DiscoveryRequest, discovery.DiscoveryResponse]) error {
	return s.serve(stream, "")
}

func (s *Server) addConn(c *conn) {
	s.mu.Lock()
	s.conns[c.id] = c
	n := len(s.conns)
	s.mu.Unlock()
	s.metrics.connected.Set(float64(n))
}

func (s *Server) removeConn(c *conn) {
	s.mu.Lock()
	delete(s.conns, c.id)
	n := len(s.conns)
	s.mu.Unlock()
	s.metrics.connected.Set(float64(n))
}

// Conns returns the current connections sorted by ID (for debug).
func (s *Server) Conns() []*conn {
	s.mu.RLock()
	out := make([]*conn, 0, len(s.conns))
	for _, c := range s.conns {
		out = append(out, c)
	}
	s.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

// typed serves one resource type on its own service (LDS, RDS, CDS, EDS).
type typed struct {
	s       *Server
	typeURL string
}

func (t typed) StreamListeners(st listenerv3.ListenerDiscoveryService_StreamListenersServer) error {
	return t.s.serve(st, t.typeURL)
}
func (t typed) StreamRoutes(st routev3.RouteDiscoveryService_StreamRoutesServer) error {
	return t.s.serve(st, t.typeURL)
}
func (t typed) StreamClusters(st clusterv3.ClusterDiscoveryService_StreamClustersServer) error {
	return t.s.serve(st, t.typeURL)
}
func (t typed) StreamEndpoints(st endpointv3.EndpointDiscoveryService_StreamEndpointsServer) error {
	return t.s.serve(st, t.typeURL)
}

// The per-type services also declare Delta and Fetch methods.
func (typed) DeltaListeners(listenerv3.ListenerDiscoveryService_DeltaListenersServer) error {
	return errUnimplemented
}
func (typed) DeltaRoutes(routev3.RouteDiscoveryService_DeltaRoutesServer) error {
	return errUnimplemented
}
func (typed) DeltaClusters(clusterv3.ClusterDiscoveryService_DeltaClustersServer) error {
	return errUnimplemented
}
func (typed) DeltaEndpoints(endpointv3.EndpointDiscoveryService_DeltaEndpointsServer) error {
	return errUnimplemented
}
func (typed) FetchListeners(context.Context, *discovery.DiscoveryRequest) (*discovery.DiscoveryResponse, error) {
	return nil, errUnimplemented
}
func (typed) FetchRoutes(context.Context, *discovery.DiscoveryRequest) (*discovery.DiscoveryResponse, error) {
	return nil, errUnimplemented
}
func (typed) FetchClusters(context.Context, *discovery.DiscoveryRequest) (*discovery.DiscoveryResponse, error) {
	return nil, errUnimplemented
}
func (typed) FetchEndpoints(context.Context, *discovery.DiscoveryRequest) (*discovery.DiscoveryResponse, error) {
	return nil, errUnimplemented
}

var _ = time.Second
