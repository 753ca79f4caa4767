package mcp_test

// The stand-in MCP server. Nacos and Higress cannot be installed here, so
// this test server, built on go-control-plane's ADS server with a cache
// that hands it pre-built responses, speaks their wire forms: resources
// wrapped in istio.mcp.v1alpha1.Resource (Nacos over SotW, as istiod
// does) or the Istio message itself (Nacos over Delta; over SotW inside an
// envoy.service.discovery.v3.Resource that carries the name). istiod
// itself is tested in istiod_test.go.

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	mcpapi "istio.io/api/mcp/v1alpha1"

	"github.com/baremesh/baremesh/core/config"
)

// wireForm is how the stand-in encodes a resource.
type wireForm int

const (
	wrapped   wireForm = iota // istio.mcp.v1alpha1.Resource{metadata, body}
	unwrapped                 // the Istio message; name from the transport
)

type standIn struct {
	form wireForm

	mu       sync.Mutex
	version  int
	res      map[string]map[string]entry // type URL → "ns/name" → entry
	watches  map[int]*pending
	nextW    int
	silent   bool   // answer nothing
	mistype  string // when set, SotW responses carry this type URL
	requests []*discovery.DiscoveryRequest
	dreqs    []*discovery.DeltaDiscoveryRequest

	lis  *cutListener
	srv  *grpc.Server
	sent atomic.Int64 // responses sent
}

type entry struct {
	version string
	any     *anypb.Any // as sent (wrapped or not)
	spec    *anypb.Any // the Istio message, for unwrapped forms
}

type pending struct {
	req   *cache.Request
	sub   cache.Subscription
	ch    chan cache.Response
	dreq  *cache.DeltaRequest
	dch   chan cache.DeltaResponse
	first bool
}

// startStandIn serves on a loopback port until the test ends.
func startStandIn(t *testing.T, form wireForm) *standIn {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &standIn{form: form, res: map[string]map[string]entry{}, watches: map[int]*pending{}, lis: newCutListener(l)}
	s.serve(t)
	return s
}

func (s *standIn) serve(t *testing.T) {
	s.srv = grpc.NewServer(grpc.MaxSendMsgSize(1 << 30))
	discovery.RegisterAggregatedDiscoveryServiceServer(s.srv, serverv3.NewServer(context.Background(), s, nil))
	go func() { _ = s.srv.Serve(s.lis) }()
	t.Cleanup(s.srv.Stop)
}

func (s *standIn) addr() string { return s.lis.Addr().String() }

// restart stops the server and serves again on the same port: every
// stream ends, the content stays.
func (s *standIn) restart(t *testing.T) {
	t.Helper()
	s.srv.Stop()
	l, err := net.Listen("tcp", s.addr())
	if err != nil {
		t.Fatal(err)
	}
	s.lis = newCutListener(l)
	s.serve(t)
}

// put sets resources of typeURL (name "ns/name" → spec) and answers
// the waiting watches.
func (s *standIn) put(typeURL string, specs map[string]proto.Message) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.version++
	m := s.res[typeURL]
	if m == nil {
		m = map[string]entry{}
		s.res[typeURL] = m
	}
	for name, spec := range specs {
		body, err := anypb.New(spec)
		if err != nil {
			panic(err)
		}
		e := entry{version: strconv.Itoa(s.version), spec: body, any: body}
		if s.form == wrapped {
			e.any, _ = anypb.New(&mcpapi.Resource{Metadata: &mcpapi.Metadata{Name: name, Version: e.version}, Body: body})
		}
		m[name] = e
	}
	s.answerLocked()
}

// putRaw sets one resource as the exact Any to send (bad input).
func (s *standIn) putRaw(typeURL, name string, a *anypb.Any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.version++
	if s.res[typeURL] == nil {
		s.res[typeURL] = map[string]entry{}
	}
	s.res[typeURL][name] = entry{version: strconv.Itoa(s.version), any: a, spec: a}
	s.answerLocked()
}

func (s *standIn) remove(typeURL string, names ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.version++
	for _, n := range names {
		delete(s.res[typeURL], n)
	}
	s.answerLocked()
}

func (s *standIn) setSilent(v bool) { s.mu.Lock(); s.silent = v; s.mu.Unlock() }

func (s *standIn) setMistype(u string) { s.mu.Lock(); s.mistype = u; s.mu.Unlock() }

// touch makes a new version with no content change.
func (s *standIn) touch() { s.mu.Lock(); s.version++; s.answerLocked(); s.mu.Unlock() }

func (s *standIn) answerLocked() {
	for id, w := range s.watches {
		if s.tryAnswerLocked(w) {
			delete(s.watches, id)
		}
	}
}

// tryAnswerLocked answers w if it has something to say.
func (s *standIn) tryAnswerLocked(w *pending) bool {
	if s.silent {
		return false
	}
	if w.req != nil {
		v := strconv.Itoa(s.version)
		if w.req.GetVersionInfo() == v {
			return false
		}
		typeURL := w.req.GetTypeUrl()
		out := &discovery.DiscoveryResponse{VersionInfo: v, TypeUrl: typeURL}
		if s.mistype != "" {
			out.TypeUrl = s.mistype
		}
		for _, name := range sortedNames(s.res[typeURL]) {
			e := s.res[typeURL][name]
			a := e.any
			if s.form == unwrapped {
				// SotW has no names: Envoy's Resource wrapper carries it.
				a, _ = anypb.New(&discovery.Resource{Name: name, Version: e.version, Resource: e.spec})
			}
			out.Resources = append(out.Resources, a)
		}
		w.ch <- &cache.PassthroughResponse{Request: w.req, DiscoveryResponse: out}
		s.sent.Add(1)
		return true
	}
	typeURL := w.dreq.GetTypeUrl()
	known := w.sub.ReturnedResources()
	out := &discovery.DeltaDiscoveryResponse{TypeUrl: typeURL, SystemVersionInfo: strconv.Itoa(s.version)}
	next := map[string]string{}
	for _, name := range sortedNames(s.res[typeURL]) {
		e := s.res[typeURL][name]
		next[name] = e.version
		if known[name] != e.version {
			out.Resources = append(out.Resources, &discovery.Resource{Name: name, Version: e.version, Resource: e.any})
		}
	}
	for name := range known {
		if _, ok := next[name]; !ok {
			out.RemovedResources = append(out.RemovedResources, name)
		}
	}
	// The first request of a type gets an answer even when empty.
	if len(out.Resources) == 0 && len(out.RemovedResources) == 0 && !w.first {
		return false
	}
	w.dch <- &cache.DeltaPassthroughResponse{DeltaRequest: w.dreq, NextVersionMap: next, DeltaDiscoveryResponse: out}
	s.sent.Add(1)
	return true
}

func sortedNames(m map[string]entry) []string {
	out := make([]string, 0, len(m))
	for n := range m {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func (s *standIn) watch(w *pending) func() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tryAnswerLocked(w) {
		return func() {}
	}
	id := s.nextW
	s.nextW++
	s.watches[id] = w
	return func() { s.mu.Lock(); delete(s.watches, id); s.mu.Unlock() }
}

// CreateWatch implements cache.ConfigWatcher.
func (s *standIn) CreateWatch(req *cache.Request, sub cache.Subscription, ch chan cache.Response) (func(), error) {
	s.mu.Lock()
	s.requests = append(s.requests, proto.Clone(req).(*discovery.DiscoveryRequest))
	s.mu.Unlock()
	return s.watch(&pending{req: req, sub: sub, ch: ch}), nil
}

// CreateDeltaWatch implements cache.ConfigWatcher.
func (s *standIn) CreateDeltaWatch(req *cache.DeltaRequest, sub cache.Subscription, ch chan cache.DeltaResponse) (func(), error) {
	s.mu.Lock()
	s.dreqs = append(s.dreqs, proto.Clone(req).(*discovery.DeltaDiscoveryRequest))
	s.mu.Unlock()
	return s.watch(&pending{dreq: req, sub: sub, dch: ch, first: req.GetResponseNonce() == "" && len(req.GetInitialResourceVersions()) == 0}), nil
}

// Fetch implements cache.ConfigFetcher.
func (s *standIn) Fetch(context.Context, *cache.Request) (cache.Response, error) {
	return nil, fmt.Errorf("fetch not supported")
}

// nacks returns the error messages of the NACKs received so far.
func (s *standIn) nacks() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, r := range s.requests {
		if r.GetErrorDetail() != nil {
			out = append(out, r.GetErrorDetail().GetMessage())
		}
	}
	for _, r := range s.dreqs {
		if r.GetErrorDetail() != nil {
			out = append(out, r.GetErrorDetail().GetMessage())
		}
	}
	return out
}

// cutListener tracks its connections so a test can cut them all, or cut
// one after it has written n more bytes (mid-response).
type cutListener struct {
	net.Listener
	mu    sync.Mutex
	conns map[*cutConn]bool
}

func newCutListener(l net.Listener) *cutListener {
	return &cutListener{Listener: l, conns: map[*cutConn]bool{}}
}

func (l *cutListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	cc := &cutConn{Conn: c, after: -1}
	l.mu.Lock()
	l.conns[cc] = true
	l.mu.Unlock()
	return cc, nil
}

// cut closes every connection.
func (l *cutListener) cut() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for c := range l.conns {
		c.Close()
		delete(l.conns, c)
	}
}

// cutAfter arms every connection to close after n more bytes.
func (l *cutListener) cutAfter(n int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for c := range l.conns {
		c.mu.Lock()
		c.after = n
		c.mu.Unlock()
	}
}

type cutConn struct {
	net.Conn
	mu    sync.Mutex
	after int64 // bytes still allowed; -1: no limit
}

func (c *cutConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	if c.after >= 0 && int64(len(b)) > c.after {
		n, _ := c.Conn.Write(b[:c.after])
		c.after = -1
		c.mu.Unlock()
		c.Conn.Close()
		return n, net.ErrClosed
	}
	if c.after >= 0 {
		c.after -= int64(len(b))
	}
	c.mu.Unlock()
	return c.Conn.Write(b)
}

var _ = config.ServiceEntry
