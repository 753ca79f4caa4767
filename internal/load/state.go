package load

import (
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"runtime"
	"slices"
	"sort"
	"sync"
	"weak"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// Type is one of the four xDS resource types a sidecar subscribes to.
type Type int

// The types, in the order Envoy needs them.
const (
	Cluster Type = iota
	Endpoint
	Listener
	Route
	numTypes
)

// Types lists every Type.
var Types = [numTypes]Type{Cluster, Endpoint, Listener, Route}

var typeURLs = [numTypes]string{
	"type.googleapis.com/envoy.config.cluster.v3.Cluster",
	"type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment",
	"type.googleapis.com/envoy.config.listener.v3.Listener",
	"type.googleapis.com/envoy.config.route.v3.RouteConfiguration",
}

const hcmTypeURL = "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"

// URL is the type's xDS type URL.
func (t Type) URL() string { return typeURLs[t] }

func (t Type) String() string { return [numTypes]string{"cds", "eds", "lds", "rds"}[t] }

// wildcard reports whether Envoy subscribes to the type with a wildcard.
func (t Type) wildcard() bool { return t == Cluster || t == Listener }

func typeOf(url string) (Type, bool) {
	for i, u := range typeURLs {
		if u == url {
			return Type(i), true
		}
	}
	return 0, false
}

var seed = maphash.MakeSeed()

// Resource is one decoded resource. Proxies that receive the same bytes
// share one Resource, so 2,000 proxies cost one decode and one copy; it
// must not be altered.
type Resource struct {
	Name string
	Msg  proto.Message
	Size int
	hash uint64
	// deps are the EDS names of an EDS cluster, or the RDS names of a
	// listener's HttpConnectionManagers.
	deps []string
}

type resKey struct {
	t    Type
	hash uint64
	size int
}

// entry is a resource as one proxy holds it, with its Delta version.
type entry struct {
	res     *Resource
	version string
}

func (e entry) hash(name string) uint64 {
	var h maphash.Hash
	h.SetSeed(seed)
	h.WriteString(name)
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], e.res.hash)
	h.Write(b[:])
	h.WriteString(e.version)
	return h.Sum64()
}

// Set is the resources of one type a proxy holds. It is immutable and
// interned by content: proxies holding the same resources share one Set.
// Its sum is the sum of its entries' hashes, so an update computes the
// new identity without building a map.
type Set struct {
	t    Type
	sum  uint64
	m    map[string]entry
	once sync.Once
	deps []string
}

type setKey struct {
	t   Type
	sum uint64
	n   int
}

// Len is the number of resources.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.m)
}

// Get returns the named resource or nil.
func (s *Set) Get(name string) *Resource {
	if s == nil {
		return nil
	}
	return s.m[name].res
}

// Names returns the resource names, sorted.
func (s *Set) Names() []string {
	if s == nil {
		return nil
	}
	out := make([]string, 0, len(s.m))
	for n := range s.m {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Deps returns, sorted and without duplicates, the EDS names of a
// cluster set or the RDS names of a listener set.
func (s *Set) Deps() []string {
	if s == nil {
		return nil
	}
	s.once.Do(func() {
		seen := map[string]bool{}
		for _, e := range s.m {
			for _, d := range e.res.deps {
				if !seen[d] {
					seen[d] = true
					s.deps = append(s.deps, d)
				}
			}
		}
		sort.Strings(s.deps)
	})
	return s.deps
}

func (s *Set) versions() map[string]string {
	if s == nil || len(s.m) == 0 {
		return nil
	}
	out := make(map[string]string, len(s.m))
	for n, e := range s.m {
		out[n] = e.version
	}
	return out
}

// interner shares Resources and Sets between proxies. Entries are weak:
// a Set or Resource no proxy holds any more is collected and forgotten.
// It is safe for concurrent use.
type interner struct {
	mu   sync.Mutex
	res  map[resKey]weak.Pointer[Resource]
	sets map[setKey]weak.Pointer[Set]
}

func newInterner() *interner {
	return &interner{res: map[resKey]weak.Pointer[Resource]{}, sets: map[setKey]weak.Pointer[Set]{}}
}

func (in *interner) resource(t Type, a *anypb.Any) (*Resource, error) {
	if a.GetTypeUrl() != t.URL() {
		return nil, fmt.Errorf("resource of type %q in a %s response", a.GetTypeUrl(), t)
	}
	k := resKey{t, maphash.Bytes(seed, a.GetValue()), len(a.GetValue())}
	in.mu.Lock()
	r := in.res[k].Value()
	in.mu.Unlock()
	if r != nil {
		return r, nil
	}
	r, err := decode(t, a.GetValue())
	if err != nil {
		return nil, err
	}
	r.hash, r.Size = k.hash, k.size
	in.mu.Lock()
	defer in.mu.Unlock()
	if old := in.res[k].Value(); old != nil {
		return old, nil
	}
	in.res[k] = weak.Make(r)
	runtime.AddCleanup(r, func(k resKey) {
		in.mu.Lock()
		if in.res[k].Value() == nil {
			delete(in.res, k)
		}
		in.mu.Unlock()
	}, k)
	return r, nil
}

// update returns the set old with put added or replaced and del removed;
// with full, put is the whole new content. A name twice in put is an
// error (the protocol says to NACK it).
func (in *interner) update(t Type, old *Set, put map[string]entry, del []string, full bool) *Set {
	var sum uint64
	n := len(put)
	if !full && old != nil {
		sum, n = old.sum, len(old.m)
		for name, e := range put {
			if o, ok := old.m[name]; ok {
				sum -= o.hash(name)
				n--
			}
			sum += e.hash(name)
			n++
		}
		for _, name := range del {
			if _, inPut := put[name]; inPut {
				continue
			}
			if o, ok := old.m[name]; ok {
				sum -= o.hash(name)
				n--
			}
		}
	} else {
		for name, e := range put {
			sum += e.hash(name)
		}
	}
	k := setKey{t, sum, n}
	if old != nil && old.sum == sum && len(old.m) == n {
		return old
	}
	in.mu.Lock()
	s := in.sets[k].Value()
	in.mu.Unlock()
	if s != nil {
		return s
	}
	m := make(map[string]entry, n)
	if !full && old != nil {
		for name, e := range old.m {
			m[name] = e
		}
		for _, name := range del {
			delete(m, name)
		}
	}
	for name, e := range put {
		m[name] = e
	}
	s = &Set{t: t, sum: sum, m: m}
	in.mu.Lock()
	defer in.mu.Unlock()
	if o := in.sets[k].Value(); o != nil {
		return o
	}
	in.sets[k] = weak.Make(s)
	runtime.AddCleanup(s, func(k setKey) {
		in.mu.Lock()
		if in.sets[k].Value() == nil {
			delete(in.sets, k)
		}
		in.mu.Unlock()
	}, k)
	return s
}

// keepOnly drops the resources whose names are not in names (sorted), as
// Envoy forgets resources it no longer subscribes to.
func (in *interner) keepOnly(s *Set, names []string) *Set {
	if s == nil {
		return nil
	}
	var del []string
	for n := range s.m {
		if _, ok := slices.BinarySearch(names, n); !ok {
			del = append(del, n)
		}
	}
	if len(del) == 0 {
		return s
	}
	return in.update(s.t, s, nil, del, false)
}

func decode(t Type, b []byte) (*Resource, error) {
	r := &Resource{}
	switch t {
	case Cluster:
		c := &clusterv3.Cluster{}
		if err := proto.Unmarshal(b, c); err != nil {
			return nil, fmt.Errorf("cluster: %w", err)
		}
		r.Name, r.Msg = c.GetName(), c
		if c.GetType() == clusterv3.Cluster_EDS {
			n := c.GetEdsClusterConfig().GetServiceName()
			if n == "" {
				n = c.GetName()
			}
			r.deps = []string{n}
		}
	case Endpoint:
		c := &endpointv3.ClusterLoadAssignment{}
		if err := proto.Unmarshal(b, c); err != nil {
			return nil, fmt.Errorf("cluster load assignment: %w", err)
		}
		r.Name, r.Msg = c.GetClusterName(), c
	case Listener:
		l := &listenerv3.Listener{}
		if err := proto.Unmarshal(b, l); err != nil {
			return nil, fmt.Errorf("listener: %w", err)
		}
		r.Name, r.Msg = l.GetName(), l
		deps, err := routeNames(l)
		if err != nil {
			return nil, fmt.Errorf("listener %s: %w", l.GetName(), err)
		}
		r.deps = deps
	case Route:
		rc := &routev3.RouteConfiguration{}
		if err := proto.Unmarshal(b, rc); err != nil {
			return nil, fmt.Errorf("route configuration: %w", err)
		}
		r.Name, r.Msg = rc.GetName(), rc
	}
	if r.Name == "" {
		return nil, fmt.Errorf("%s resource without a name", t)
	}
	return r, nil
}

// routeNames finds the RDS route config names of the HttpConnectionManagers
// in l's filter chains.
func routeNames(l *listenerv3.Listener) ([]string, error) {
	chains := slices.Clone(l.GetFilterChains())
	if d := l.GetDefaultFilterChain(); d != nil {
		chains = append(chains, d)
	}
	var anys []*anypb.Any
	for _, fc := range chains {
		for _, f := range fc.GetFilters() {
			anys = append(anys, f.GetTypedConfig())
		}
	}
	if a := l.GetApiListener().GetApiListener(); a != nil {
		anys = append(anys, a)
	}
	var out []string
	for _, a := range anys {
		if a.GetTypeUrl() != hcmTypeURL {
			continue
		}
		h := &hcmv3.HttpConnectionManager{}
		if err := proto.Unmarshal(a.GetValue(), h); err != nil {
			return nil, fmt.Errorf("http connection manager: %w", err)
		}
		if n := h.GetRds().GetRouteConfigName(); n != "" && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out, nil
}
