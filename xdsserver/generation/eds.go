package generation

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/core/push"
	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/eds"
	"github.com/baremesh/baremesh/xdsserver/wire"
	"github.com/baremesh/baremesh/xdsserver/xdstype"
)

// edsKey is every input of one cluster's ClusterLoadAssignment: the
// snapshot (by version: services, DestinationRules, Sidecars), the
// endpoint version of the services with that hostname, and the proxy
// fields EDS may read. A cached EDS generation receives its key and
// nothing else (generateCLA): the proxy it sees is rebuilt from the key,
// and the snapshot it reads is the one the key names (edsInput).
type edsKey struct {
	cluster   string
	push      uint64
	endpoints uint64
	nodeType  model.NodeType
	namespace string
	dnsDomain string
	labels    string // canonical k=v,… form
	locality  string // region/zone/subzone
	proxyless bool
	// netView: the proxy's REQUESTED_NETWORK_VIEW; network and families
	// (model.Proxy.Families bits): its network and address families,
	// only with network gateways in the mesh (gen/eds/network.go).
	netView  string
	network  string
	families uint8
}

// edsInput is an edsKey with the snapshot it names: pc has version
// k.push and is pinned at endpoint versions that sum to k.endpoints for
// k.cluster's host, so it holds exactly what the key says and no more.
type edsInput struct {
	key edsKey
	pc  *push.PushContext
}

// baseEDSKey holds the proxy's part of every edsKey; forCluster fills in
// the rest.
func baseEDSKey(pc *push.PushContext, p *model.Proxy) edsKey {
	k := edsKey{push: pc.Version, nodeType: p.Type, namespace: p.Namespace, dnsDomain: p.DNSDomain,
		labels: canonicalLabels(p.Labels), proxyless: p.Proxyless}
	if l := p.Locality; l != nil {
		k.locality = l.GetRegion() + "/" + l.GetZone() + "/" + l.GetSubZone()
	}
	k.netView = p.Metadata[eds.RequestedNetworkView]
	if pc.Networks.Enabled() {
		k.network, k.families = p.Network, families(p)
	}
	return k
}

// families is p's address families as model.Proxy.Families bits.
func families(p *model.Proxy) uint8 {
	var f uint8
	v4, v6 := p.IPFamilies()
	if v4 {
		f |= model.FamilyIPv4
	}
	if v6 {
		f |= model.FamilyIPv6
	}
	return f
}

func (k edsKey) forCluster(pc *push.PushContext, cluster string) edsKey {
	k.cluster = cluster
	if host := wire.ClusterHost(cluster); host != "" {
		for _, s := range pc.ServicesByHost(host) {
			k.endpoints += pc.Endpoints.Version(s.Key())
		}
	}
	return k
}

// proxy is the proxy a cached EDS generation sees: the key's fields and
// nothing else.
func (k edsKey) proxy() *model.Proxy {
	p := &model.Proxy{ID: "cache", Type: k.nodeType, Namespace: k.namespace, DNSDomain: k.dnsDomain,
		Labels: parseLabels(k.labels), Proxyless: k.proxyless, Metadata: map[string]string{}, Network: k.network, Families: k.families}
	if k.locality != "" {
		parts := strings.SplitN(k.locality, "/", 3)
		p.Locality = &corev3.Locality{Region: parts[0], Zone: parts[1], SubZone: parts[2]}
	}
	if k.netView != "" {
		p.Metadata[eds.RequestedNetworkView] = k.netView
	}
	return p
}

func canonicalLabels(l map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(l)) {
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(l[k])
		b.WriteByte('\x00')
	}
	return b.String()
}

func parseLabels(s string) map[string]string {
	out := map[string]string{}
	for _, kv := range strings.Split(s, "\x00") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			out[k] = v
		}
	}
	return out
}

// edsCache holds encoded ClusterLoadAssignments of the current snapshot.
// Identical clusters for thousands of proxies are generated and encoded
// once. In assert mode (BAREMESH_CACHE_ASSERT=1, on in tests) every hit
// is regenerated and a difference panics: a key that misses an input is
// a bug of the class that has produced CVEs in istiod.
type edsCache struct {
	mu   sync.Mutex
	push uint64
	m    map[edsKey]*wire.Resource
	// newest is, per key without its endpoints part, the endpoints of
	// the entry cached: an endpoint change replaces the cluster's entry
	// instead of adding one (endpoint-only changes keep the snapshot, and
	// so the cache, for as long as no full push comes).
	newest map[edsKey]uint64
	hits   uint64
	misses uint64
	// lists holds whole-subscription results: thousands of proxies with
	// the same subscription and key fields get the same list of CLAs,
	// and only the first looks up its thousands of clusters.
	lists map[edsListKey][]*wire.Resource
	// flights are the lists being generated (lookupList); waits counts
	// the callers that waited for one instead of generating.
	flights map[edsListKey]chan struct{}
	waits   uint64
}

// maxEDSLists bounds the whole-subscription lists kept per snapshot:
// proxies whose keys all differ (unique labels, say) each hold a list,
// and past this many they look their clusters up one by one.
const maxEDSLists = 256

// edsListKey is every input of a whole subscription's CLAs: the proxy's
// part of the edsKey, the shared list (kept alive by the entry's key, so
// its address is not reused while cached) and the endpoint index's
// generation, which moves with any endpoint change.
type edsListKey struct {
	base      edsKey
	list      *wire.NameList
	endpoints uint64
}

// lookupList returns the cached list of k. If there is none and another
// caller is generating it, it waits for that generation and looks again:
// a hundred streams asking for the same list at once (a push reaching
// every wildcard EDS stream) generate it once, not once per generation
// slot. Otherwise lead is not nil and the caller generates: it must call
// lead with the result (nil if it failed), which caches it and wakes the
// waiters.
func (c *edsCache) lookupList(k edsListKey) (res []*wire.Resource, ok bool, lead func([]*wire.Resource)) {
	c.mu.Lock()
	for {
		if c.advance(k.base.push); k.base.push != c.push {
			c.mu.Unlock()
			return nil, false, func([]*wire.Resource) {} // an older snapshot: not cached
		}
		if res, ok := c.lists[k]; ok {
			c.mu.Unlock()
			return res, true, nil
		}
		ch, busy := c.flights[k]
		if !busy {
			break
		}
		c.waits++
		c.mu.Unlock()
		<-ch
		c.mu.Lock()
	}
	ch := make(chan struct{})
	if c.flights == nil {
		c.flights = map[edsListKey]chan struct{}{}
	}
	c.flights[k] = ch
	c.mu.Unlock()
	return nil, false, func(res []*wire.Resource) {
		c.mu.Lock()
		defer c.mu.Unlock()
		delete(c.flights, k)
		close(ch)
		if res == nil {
			return
		}
		if c.advance(k.base.push); k.base.push != c.push {
			return
		}
		if c.lists == nil {
			c.lists = map[edsListKey][]*wire.Resource{}
		}
		if len(c.lists) < maxEDSLists {
			c.lists[k] = res
		}
	}
}

// get returns the cached entry for k, dropping entries of older
// snapshots first.
func (c *edsCache) get(k edsKey) (*wire.Resource, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.advance(k.push); k.push != c.push {
		return nil, false // an older snapshot: do not cache
	}
	e, ok := c.m[k]
	if ok {
		c.hits++
	} else {
		c.misses++
	}
	return e, ok
}

// advance drops everything cached when push is a newer snapshot than
// the cache's; c.mu is held.
func (c *edsCache) advance(push uint64) {
	if push > c.push || c.m == nil {
		c.push, c.m, c.lists, c.newest = push, map[edsKey]*wire.Resource{}, nil, map[edsKey]uint64{}
	}
}

func (c *edsCache) put(k edsKey, e *wire.Resource) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if k.push != c.push || c.m == nil {
		return
	}
	base := k
	base.endpoints = 0
	if old, ok := c.newest[base]; ok && old != k.endpoints {
		if old > k.endpoints {
			return // a newer generation is cached already
		}
		stale := base
		stale.endpoints = old
		delete(c.m, stale)
	}
	c.newest[base] = k.endpoints
	c.m[k] = e
}

// buildPerName builds the resources of names (EDS) through the cache,
// from pc, one snapshot pinned for the whole response: the keys and the
// generations read the same endpoints. A whole subscription (list not
// nil) is looked up as one; the result is shared and must not be
// altered.
func (b *Builder) buildPerName(pc *push.PushContext, t *xdstype.Type, p *model.Proxy, names []string, list *wire.NameList) ([]*wire.Resource, error) {
	cache := b.eds
	base := baseEDSKey(pc, p)
	lk := edsListKey{base: base, list: list, endpoints: pc.Endpoints.Generation()}
	var cached []*wire.Resource
	if list != nil {
		var ok bool
		var lead func([]*wire.Resource)
		if cached, ok, lead = cache.lookupList(lk); ok && !b.assert {
			return cached, nil
		}
		if lead != nil {
			var res []*wire.Resource
			defer func() { lead(res) }() // nil on error: the next caller tries again
			res, err := b.perName(pc, t, p, names, base, nil)
			return res, err
		}
	}
	return b.perName(pc, t, p, names, base, cached)
}

// perName looks names up one by one; cached, if not nil, is the
// whole-subscription entry to check them against (assert mode).
func (b *Builder) perName(pc *push.PushContext, t *xdstype.Type, p *model.Proxy, names []string, base edsKey, cached []*wire.Resource) ([]*wire.Resource, error) {
	cache := b.eds
	out := make([]*wire.Resource, 0, len(names))
	for _, name := range names {
		k := base.forCluster(pc, name)
		if e, ok := cache.get(k); ok {
			if b.assert {
				// Against the real proxy, not the key's: a field the key
				// lacks shows as a difference.
				fresh, err := b.encode(t, gen.Input{Push: pc, Proxy: p, Names: []string{name}})
				if err != nil || len(fresh) != 1 || fresh[0].Sum != e.Sum {
					b.mismatch(fmt.Sprintf("baremesh cache assert: %s %s for proxy %s: cached bytes differ from a fresh generation (err %v): the cache key misses an input", strings.ToUpper(t.Short), name, p.ID, err))
				}
			}
			out = append(out, e)
			continue
		}
		res, err := b.generateCLA(t, edsInput{key: k, pc: pc})
		if err != nil {
			return nil, err
		}
		if len(res) == 1 {
			cache.put(k, res[0])
		}
		out = append(out, res...)
	}
	if cached != nil && !wire.Same(cached, out) {
		b.mismatch(fmt.Sprintf("baremesh cache assert: %s of the whole subscription for proxy %s differs from its clusters: the list key misses an input", strings.ToUpper(t.Short), p.ID))
	}
	return out, nil
}

// wildcardList stands for a wildcard subscription (every cluster the
// proxy sees) in the whole-subscription cache.
var wildcardList = &wire.NameList{}

// buildWildcard builds a wildcard EDS subscription through the
// whole-subscription cache: once per key and endpoint generation, not
// once per stream. A client may ask EDS for everything; before, each such
// stream regenerated and held every CLA on every push (100 streams beside
// a 50,000-endpoint service: 100 generations of it per push, issue #30).
func (b *Builder) buildWildcard(pc *push.PushContext, t *xdstype.Type, p *model.Proxy) ([]*wire.Resource, error) {
	base := baseEDSKey(pc, p)
	lk := edsListKey{base: base, list: wildcardList, endpoints: pc.Endpoints.Generation()}
	cached, ok, lead := b.eds.lookupList(lk)
	if ok {
		if b.assert {
			fresh, err := b.encode(t, gen.Input{Push: pc, Proxy: p})
			if err != nil || !wire.Same(fresh, cached) {
				b.mismatch(fmt.Sprintf("baremesh cache assert: %s wildcard for proxy %s differs from the cached output of its key: the key misses an input (err %v)", strings.ToUpper(t.Short), p.ID, err))
			}
		}
		return cached, nil
	}
	// The cached generation sees the key's proxy, as generateCLA does.
	var res []*wire.Resource
	defer func() { lead(res) }() // nil on error: the next caller tries again
	res, err := b.encode(t, gen.Input{Push: pc, Proxy: base.proxy()})
	return res, err
}

// generateCLA is the cached generation: it receives its key (with the
// snapshot the key names) and nothing else.
func (b *Builder) generateCLA(t *xdstype.Type, in edsInput) ([]*wire.Resource, error) {
	return b.encode(t, gen.Input{Push: in.pc, Proxy: in.key.proxy(), Names: []string{in.key.cluster}})
}
