package load

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
)

// View is a proxy's ACKed state: what it held after sending its latest
// ACK of each type. It must not be altered.
type View struct {
	sets [numTypes]*Set
}

// Set returns the resources of type t.
func (v View) Set(t Type) *Set { return v.sets[t] }

// Cluster returns the named cluster or nil.
func (v View) Cluster(name string) *clusterv3.Cluster {
	c, _ := msg(v.sets[Cluster].Get(name)).(*clusterv3.Cluster)
	return c
}

// Endpoints returns the named ClusterLoadAssignment or nil.
func (v View) Endpoints(name string) *endpointv3.ClusterLoadAssignment {
	c, _ := msg(v.sets[Endpoint].Get(name)).(*endpointv3.ClusterLoadAssignment)
	return c
}

// Listener returns the named listener or nil.
func (v View) Listener(name string) *listenerv3.Listener {
	l, _ := msg(v.sets[Listener].Get(name)).(*listenerv3.Listener)
	return l
}

// Route returns the named route configuration or nil.
func (v View) Route(name string) *routev3.RouteConfiguration {
	r, _ := msg(v.sets[Route].Get(name)).(*routev3.RouteConfiguration)
	return r
}

func msg(r *Resource) any {
	if r == nil {
		return nil
	}
	return r.Msg
}

// Configured reports whether the proxy holds CDS and LDS and every EDS
// and RDS resource they refer to: Envoy's end of warming.
func (v View) Configured() bool {
	if v.sets[Cluster] == nil || v.sets[Listener] == nil {
		return false
	}
	return v.sets[Endpoint].holdsAll(v.sets[Cluster].depList()) && v.sets[Route].holdsAll(v.sets[Listener].depList())
}

// Predicate is a condition on a proxy's ACKed state. It is called from
// the proxies' goroutines and must be safe for concurrent use.
type Predicate func(View) bool

// HasEndpoint is true when the ClusterLoadAssignment named cluster has an
// endpoint with socket address addr.
func HasEndpoint(cluster, addr string) Predicate {
	return func(v View) bool {
		for _, le := range v.Endpoints(cluster).GetEndpoints() {
			for _, e := range le.GetLbEndpoints() {
				if e.GetEndpoint().GetAddress().GetSocketAddress().GetAddress() == addr {
					return true
				}
			}
		}
		return false
	}
}

// HasRouteDomain is true when some route configuration has a virtual
// host serving domain.
func HasRouteDomain(domain string) Predicate {
	return func(v View) bool {
		s := v.sets[Route]
		if s == nil {
			return false
		}
		for _, e := range s.m {
			for _, vh := range e.res.Msg.(*routev3.RouteConfiguration).GetVirtualHosts() {
				if slices.Contains(vh.GetDomains(), domain) {
					return true
				}
			}
		}
		return false
	}
}

// All is true when every p is.
func All(ps ...Predicate) Predicate {
	return func(v View) bool {
		for _, p := range ps {
			if !p(v) {
				return false
			}
		}
		return true
	}
}

// Waiter watches the fleet for a predicate; see Fleet.Expect.
type Waiter struct {
	f     *Fleet
	pred  Predicate
	at    []atomic.Int64 // unix nanoseconds when proxy i satisfied pred
	left  atomic.Int64
	done  chan struct{}
	wakeC chan struct{}
}

// Expect starts watching for pred: from now on, each proxy's first ACKed
// state that satisfies pred is timed. Call it before making the change
// to be measured; proxies that already satisfy it are timed now.
func (f *Fleet) Expect(pred Predicate) *Waiter {
	w := &Waiter{f: f, pred: pred, at: make([]atomic.Int64, len(f.proxies)), done: make(chan struct{}), wakeC: make(chan struct{}, 1)}
	w.left.Store(int64(len(f.proxies)))
	f.wmu.Lock()
	ws := append(slices.Clone(*f.waiters.Load()), w)
	f.waiters.Store(&ws)
	f.wmu.Unlock()
	now := time.Now()
	for i, p := range f.proxies {
		if pred(p.view()) {
			w.mark(i, now)
		}
	}
	return w
}

func (f *Fleet) notify(i int, v View, at time.Time) {
	for _, w := range *f.waiters.Load() {
		if w.at[i].Load() == 0 && w.pred(v) {
			w.mark(i, at)
		}
	}
}

func (w *Waiter) mark(i int, at time.Time) {
	if w.at[i].CompareAndSwap(0, at.UnixNano()) && w.left.Add(-1) == 0 {
		close(w.done)
		w.stop()
	}
}

func (w *Waiter) wake() {
	select {
	case w.wakeC <- struct{}{}:
	default:
	}
}

func (w *Waiter) stop() {
	w.f.wmu.Lock()
	defer w.f.wmu.Unlock()
	ws := slices.DeleteFunc(slices.Clone(*w.f.waiters.Load()), func(x *Waiter) bool { return x == w })
	w.f.waiters.Store(&ws)
}

// Wait returns when every proxy has satisfied the predicate, or with an
// error when ctx ends or the fleet failed first.
func (w *Waiter) Wait(ctx context.Context) error {
	for {
		select {
		case <-w.done:
			return nil
		case <-ctx.Done():
			w.stop()
			return fmt.Errorf("%d of %d proxies not there: %w", w.Remaining(), len(w.at), ctx.Err())
		case <-w.wakeC:
			if err := w.f.Err(); err != nil {
				w.stop()
				return fmt.Errorf("%d of %d proxies not there: %w", w.Remaining(), len(w.at), err)
			}
		}
	}
}

// Remaining is how many proxies have not satisfied the predicate yet.
func (w *Waiter) Remaining() int { return int(w.left.Load()) }

// Latencies returns, for each proxy that satisfied the predicate, the
// time from since to its ACK (0 if it already satisfied it before since).
func (w *Waiter) Latencies(since time.Time) Latencies {
	var out Latencies
	for i := range w.at {
		if ns := w.at[i].Load(); ns != 0 {
			out = append(out, max(0, time.Unix(0, ns).Sub(since)))
		}
	}
	return out
}

// Latencies are per-proxy durations.
type Latencies []time.Duration

// Summary holds percentiles of Latencies.
type Summary struct {
	N                  int
	P50, P90, P99, Max time.Duration
}

// Percentiles summarises l by nearest rank.
func (l Latencies) Percentiles() Summary {
	if len(l) == 0 {
		return Summary{}
	}
	s := slices.Clone(l)
	slices.Sort(s)
	rank := func(p float64) time.Duration {
		i := int(p*float64(len(s))+0.999999) - 1
		return s[min(max(i, 0), len(s)-1)]
	}
	return Summary{N: len(s), P50: rank(0.50), P90: rank(0.90), P99: rank(0.99), Max: s[len(s)-1]}
}

func (s Summary) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "n=%d p50=%v p90=%v p99=%v max=%v", s.N, r(s.P50), r(s.P90), r(s.P99), r(s.Max))
	return b.String()
}

func r(d time.Duration) time.Duration { return d.Round(100 * time.Microsecond) }
