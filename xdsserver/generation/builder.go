// Package generation is the generation stage of the xDS server: it runs a
// type's generator for a proxy through the generation caches (whole
// outputs by proxy shape, EDS per cluster and per whole subscription)
// under a bound on concurrent generations, and says which types a push
// can affect. A cached generator receives its cache key and nothing else;
// in assert mode (BAREMESH_CACHE_ASSERT=1, on in tests) every hit is
// regenerated for the real proxy and a difference is reported.
//
// It imports core, xdsserver/gen, xdsserver/xdstype and xdsserver/wire,
// never the protocol (ads).
package generation

import (
	"os"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/mem"

	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/core/push"
	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/wire"
	"github.com/baremesh/baremesh/xdsserver/xdstype"
)

// Options configure a Builder.
type Options struct {
	// MaxConcurrent bounds how many generations run at once; default
	// 2×GOMAXPROCS.
	MaxConcurrent int
	// NoCache turns the generation caches off. CacheAssert regenerates on
	// every cache hit and reports a difference (default: the environment
	// variable BAREMESH_CACHE_ASSERT=1).
	NoCache     bool
	CacheAssert bool
	// OnCacheMismatch replaces the assertion's panic (for tests of the
	// assertion itself).
	OnCacheMismatch func(msg string)
	// GenTime, if set, observes each generation's duration by short type.
	GenTime *prometheus.HistogramVec
}

// Builder generates xDS resources for proxies. Safe for concurrent use.
type Builder struct {
	interned *wire.Interner
	eds      *edsCache
	shapes   *shapeCache
	sem      chan struct{}
	genTime  *prometheus.HistogramVec
	// assert: regenerate on cache hits and compare (mismatch reports).
	assert   bool
	mismatch func(msg string)
	// ef: the compiled EnvoyFilters and their problems (envoyfilter.go).
	ef efState
	// labels: the label keys configs read (labels.go).
	labels labelKeys
}

// New returns a Builder.
func New(opts Options) *Builder {
	if opts.MaxConcurrent <= 0 {
		opts.MaxConcurrent = 2 * runtime.GOMAXPROCS(0)
	}
	b := &Builder{interned: wire.NewInterner(), sem: make(chan struct{}, opts.MaxConcurrent), genTime: opts.GenTime,
		assert: opts.CacheAssert || os.Getenv("BAREMESH_CACHE_ASSERT") == "1", mismatch: opts.OnCacheMismatch}
	if b.mismatch == nil {
		b.mismatch = func(msg string) { panic(msg) }
	}
	if !opts.NoCache {
		b.eds, b.shapes = &edsCache{}, &shapeCache{}
	}
	return b
}

// Build generates t for proxy p from snapshot pc, under the generation
// bound, through the caches. names nil is a wildcard subscription; list,
// if not nil, is the shared subscription list names is (not a part of
// it). joined, when not nil, gives the whole result framed (for SotW or
// for Delta) as a few
// buffer. The result is sorted by name, shared, and must not be altered.
func (b *Builder) Build(pc *push.PushContext, t *xdstype.Type, p *model.Proxy, names []string, list *wire.NameList, req *push.Request) (res []*wire.Resource, joined func(delta bool) mem.BufferSlice, err error) {
	start := time.Now()
	b.sem <- struct{}{}
	defer func() {
		<-b.sem
		if b.genTime != nil {
			b.genTime.WithLabelValues(t.Short).Observe(time.Since(start).Seconds())
		}
	}()
	switch {
	case b.eds == nil:
	case t.Cache == xdstype.CachePerName && names != nil:
		res, err = b.buildPerName(pc, t, p, names, list)
		return res, nil, err
	case t.Cache == xdstype.CachePerName && t.Endpoints:
		res, err = b.buildWildcard(pc, t, p)
		return res, nil, err
	case t.Cache == xdstype.CacheShape:
		return b.buildShape(pc, t, p, names)
	}
	res, err = b.encode(t, gen.Input{Push: pc, Proxy: p, Names: names, Request: req})
	return res, nil, err
}

// encode runs t's generator and encodes what it returns.
func (b *Builder) encode(t *xdstype.Type, in gen.Input) ([]*wire.Resource, error) {
	res, err := t.Generate(in)
	if err != nil {
		return nil, err
	}
	res = b.patch(t, in, res)
	return wire.Encode(t.URL, res, b.interned)
}

// Stats returns the per-name cache's hits and misses (for tests and
// debug pages).
func (b *Builder) Stats() (hits, misses uint64) {
	if b.eds == nil {
		return 0, 0
	}
	b.eds.mu.Lock()
	defer b.eds.mu.Unlock()
	return b.eds.hits, b.eds.misses
}
