package model

import (
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/baremesh/baremesh/core/config"
)

// EndpointIndex holds every service's endpoints, in shards: one per
// contributing source object (a ServiceEntry). A shard is replaced whole
// and never altered, so a slice a reader got stays valid. Each service has
// a version that moves when any of its shards changes. Safe for
// concurrent use.
type EndpointIndex struct {
	mu      sync.RWMutex
	shards  map[ServiceKey]map[config.Key][]*Endpoint
	version map[ServiceKey]uint64
	counter uint64
	// merged caches Endpoints' result per service until a shard changes.
	merged map[ServiceKey][]*Endpoint
	// addrs counts endpoints by address, so "is anything at this IP?" is
	// one lookup.
	addrs map[string]int
	// at counts endpoints by address and service port: what a proxy at
	// that address serves, without merging every service's endpoints.
	// An address's map is replaced, never altered: views share it.
	at map[string]map[AddrRef]int
	// view is the view at counter, made on first use (View).
	view *EndpointView
}

// AddrRef is a service port with an endpoint at some address: the
// endpoint's service, its service port name and its port.
type AddrRef struct {
	Service  ServiceKey
	PortName string
	Port     uint32
}

// NewEndpointIndex returns an empty index.
func NewEndpointIndex() *EndpointIndex {
	return &EndpointIndex{shards: map[ServiceKey]map[config.Key][]*Endpoint{}, version: map[ServiceKey]uint64{}, addrs: map[string]int{},
		at: map[string]map[AddrRef]int{}, merged: map[ServiceKey][]*Endpoint{}}
}

// SetShard replaces one shard of a service (nil removes it) and reports
// whether anything changed. If addrs is not nil, the addresses of the old
// and the new endpoints are added to it (a proxy at one of them may need
// its inbound config rebuilt).
func (x *EndpointIndex) SetShard(svc ServiceKey, shard config.Key, eps []*Endpoint, addrs map[string]bool) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	cur := x.shards[svc][shard]
	if endpointsEqual(cur, eps) {
		return false
	}
	touched := map[string]map[AddrRef]int{} // the addresses' new maps
	ref := func(e *Endpoint, d int) {
		m, ok := touched[e.Address]
		if !ok {
			m = maps.Clone(x.at[e.Address])
			if m == nil {
				m = map[AddrRef]int{}
			}
			touched[e.Address] = m
		}
		r := AddrRef{Service: svc, PortName: e.ServicePortName, Port: e.Port}
		if m[r] += d; m[r] <= 0 {
			delete(m, r)
		}
	}
	for _, e := range cur {
		if addrs != nil {
			addrs[e.Address] = true
		}
		if x.addrs[e.Address]--; x.addrs[e.Address] <= 0 {
			delete(x.addrs, e.Address)
		}
		ref(e, -1)
	}
	for _, e := range eps {
		if addrs != nil {
			addrs[e.Address] = true
		}
		x.addrs[e.Address]++
		ref(e, 1)
	}
	for a, m := range touched {
		if len(m) == 0 {
			delete(x.at, a)
		} else {
			x.at[a] = m
		}
	}
	// A service's shard map is replaced, never altered: views share it.
	m := maps.Clone(x.shards[svc])
	if m == nil {
		m = map[config.Key][]*Endpoint{}
	}
	x.shards[svc] = m
	if len(eps) == 0 {
		delete(m, shard)
		if len(m) == 0 {
			delete(x.shards, svc)
		}
	} else {
		m[shard] = eps
	}
	delete(x.merged, svc)
	x.counter++
	x.view = nil
	x.version[svc] = x.counter
	return true
}

// Endpoints returns a service's endpoints, every shard merged, sorted by
// address, port and port name. The result must not be altered.
//
// The merged list is kept until a shard of the service changes: every
// proxy's EDS (and inbound lookup) reads it, so it is built once per
// change, not once per read.
func (x *EndpointIndex) Endpoints(svc ServiceKey) []*Endpoint {
	x.mu.RLock()
	out, ok := x.merged[svc]
	x.mu.RUnlock()
	if ok {
		return out
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if out, ok := x.merged[svc]; ok {
		return out
	}
	out = mergeShards(x.shards[svc])
	x.merged[svc] = out
	return out
}

// View returns the index as it is now, at one generation: an immutable
// view that a snapshot pins, so that a response's cache keys and its
// generators read the same endpoints. Views of one generation are one
// view; making one copies the index's maps (not the endpoints), once per
// generation.
func (x *EndpointIndex) View() *EndpointView {
	x.mu.RLock()
	v := x.view
	x.mu.RUnlock()
	if v != nil {
		return v
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.view == nil {
		x.view = &EndpointView{src: x, gen: x.counter, shards: maps.Clone(x.shards), version: maps.Clone(x.version),
			addrs: maps.Clone(x.addrs), at: maps.Clone(x.at), merged: maps.Clone(x.merged)}
	}
	return x.view
}

// HasAddress reports whether any endpoint of any service is at addr.
func (x *EndpointIndex) HasAddress(addr string) bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.addrs[addr] > 0
}

// Generation returns a number that changes whenever any endpoint changes.
func (x *EndpointIndex) Generation() uint64 {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.counter
}

// Version returns a number that changes whenever svc's endpoints change.
func (x *EndpointIndex) Version(svc ServiceKey) uint64 {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.version[svc]
}

// EndpointView is the endpoint index at one generation (EndpointIndex.View).
// It never changes; safe for concurrent use. A nil view has no endpoints.
type EndpointView struct {
	src     *EndpointIndex
	gen     uint64
	shards  map[ServiceKey]map[config.Key][]*Endpoint // shard maps are never altered
	version map[ServiceKey]uint64
	addrs   map[string]int
	at      map[string]map[AddrRef]int // address maps are never altered
	// merged memoises Endpoints (a function of the view).
	mu     sync.RWMutex
	merged map[ServiceKey][]*Endpoint
}

// Endpoints returns a service's endpoints, every shard merged, sorted by
// address, port and port name. The result must not be altered.
func (v *EndpointView) Endpoints(svc ServiceKey) []*Endpoint {
	if v == nil {
		return nil
	}
	v.mu.RLock()
	out, ok := v.merged[svc]
	v.mu.RUnlock()
	if ok {
		return out
	}
	out = mergeShards(v.shards[svc])
	v.mu.Lock()
	v.merged[svc] = out
	v.mu.Unlock()
	// The index keeps it too while the service is unchanged, for the
	// views of later generations.
	x := v.src
	x.mu.Lock()
	if x.version[svc] == v.version[svc] {
		x.merged[svc] = out
	}
	x.mu.Unlock()
	return out
}

// HasAddress reports whether any endpoint of any service is at addr.
func (v *EndpointView) HasAddress(addr string) bool { return v != nil && v.addrs[addr] > 0 }

// At returns the service ports with an endpoint at addr, each once,
// sorted by service (namespace, hostname), port and port name.
func (v *EndpointView) At(addr string) []AddrRef {
	if v == nil {
		return nil
	}
	m := v.at[addr]
	out := make([]AddrRef, 0, len(m))
	for r := range m {
		out = append(out, r)
	}
	slices.SortFunc(out, compareRefs)
	return out
}

func compareRefs(a, b AddrRef) int {
	if c := strings.Compare(a.Service.Namespace, b.Service.Namespace); c != 0 {
		return c
	}
	if c := strings.Compare(a.Service.Hostname, b.Service.Hostname); c != 0 {
		return c
	}
	if a.Port != b.Port {
		return int(a.Port) - int(b.Port)
	}
	return strings.Compare(a.PortName, b.PortName)
}

// Generation is the index's generation this view shows.
func (v *EndpointView) Generation() uint64 {
	if v == nil {
		return 0
	}
	return v.gen
}

// Version returns a number that changes whenever svc's endpoints change.
func (v *EndpointView) Version(svc ServiceKey) uint64 {
	if v == nil {
		return 0
	}
	return v.version[svc]
}

func compareEndpoints(a, b *Endpoint) int {
	if c := strings.Compare(a.Address, b.Address); c != 0 {
		return c
	}
	if a.Port != b.Port {
		return int(a.Port) - int(b.Port)
	}
	return strings.Compare(a.ServicePortName, b.ServicePortName)
}

func endpointsEqual(a, b []*Endpoint) bool {
	return slices.EqualFunc(a, b, func(x, y *Endpoint) bool {
		return x.Address == y.Address && x.Port == y.Port && x.ServicePortName == y.ServicePortName &&
			maps.Equal(x.Labels, y.Labels) && x.Network == y.Network && x.Locality == y.Locality &&
			x.Weight == y.Weight && x.ServiceAccount == y.ServiceAccount && x.Healthy == y.Healthy &&
			x.Workload == y.Workload
	})
}

// mergeShards is one service's endpoints from all its shards, in the
// stable order compareEndpoints gives; the index and its views share it.
func mergeShards(m map[config.Key][]*Endpoint) []*Endpoint {
	n := 0
	for _, s := range m {
		n += len(s)
	}
	out := make([]*Endpoint, 0, n)
	for _, s := range m {
		out = append(out, s...)
	}
	slices.SortFunc(out, compareEndpoints)
	return out
}
