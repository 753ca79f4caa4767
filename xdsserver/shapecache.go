package xdsserver

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"google.golang.org/grpc/mem"

	"github.com/baremesh/baremesh/core/push"
	"github.com/baremesh/baremesh/xdsserver/gen"
)

// shapeKey is every input of a proxy's LDS, CDS or RDS: the snapshot (by
// version), the subscription, and the proxy fields those generators read.
// A proxy's IPs matter only where an endpoint is at one of them (its
// inbound side); then the endpoint index generation is part of the key
// too. Thousands of sidecars that differ only in their address share one
// key, so their config is generated and encoded once.
type shapeKey struct {
	typeURL      string
	push         uint64
	nodeType     gen.NodeType
	namespace    string
	dnsDomain    string
	labels       string
	proxyless    bool
	istioVersion string
	// dnsAutoAllocate: whether the proxy sees allocated service
	// addresses (listener addresses, RDS names and domains follow it).
	dnsAutoAllocate bool
	ips             string // only the IPs that some endpoint is at
	endpoints       uint64 // endpoint index generation, when ips is set
	names           uint64 // hash of the subscribed names; 0 for wildcard
	wildcard        bool
}

func newShapeKey(pc *push.PushContext, typeURL string, p *gen.Proxy, names []string) shapeKey {
	k := shapeKey{typeURL: typeURL, push: pc.Version, nodeType: p.Type, namespace: p.Namespace, dnsDomain: p.DNSDomain,
		labels: canonicalLabels(p.Labels), proxyless: p.Proxyless, istioVersion: p.IstioVersion, dnsAutoAllocate: p.DNSAutoAllocate,
		wildcard: names == nil}
	var ips []string
	for _, ip := range p.IPs {
		if pc.Endpoints.HasAddress(ip) {
			ips = append(ips, ip)
		}
	}
	if len(ips) > 0 {
		k.ips = strings.Join(ips, ",")
		k.endpoints = pc.Endpoints.Generation()
	}
	if names != nil {
		k.names = namesHash(names)
	}
	return k
}

// proxy is the proxy a cached generation sees: the key's fields only.
func (k shapeKey) proxy() *gen.Proxy {
	p := &gen.Proxy{ID: "cache", Type: k.nodeType, Namespace: k.namespace, DNSDomain: k.dnsDomain,
		Labels: parseLabels(k.labels), Proxyless: k.proxyless, IstioVersion: k.istioVersion, DNSAutoAllocate: k.dnsAutoAllocate,
		Metadata: map[string]string{}}
	if k.ips != "" {
		p.IPs = strings.Split(k.ips, ",")
	}
	return p
}

// shapeCache holds whole LDS, CDS and RDS outputs of the current snapshot.
type shapeCache struct {
	mu   sync.Mutex
	push uint64
	m    map[shapeKey]*shapeEntry
}

// shapeEntry is filled once; later callers wait for it (no stampede of
// thousands of identical generations in a connect storm).
type shapeEntry struct {
	// joined is every resource's framing in one buffer, made on first
	// use: a whole set goes out as one part that gRPC writes without
	// copying it into frame-sized pieces.
	joinOnce sync.Once
	joinBuf  mem.Buffer
	done     chan struct{}
	names    []string // the subscription, checked on a hit: the key holds only its hash
	res      []*encoded
	err      error
}

// generateShape builds LDS, CDS or RDS through the cache. In assert mode
// a hit is checked against a fresh generation for the real proxy: a
// difference means the key misses an input.
func (e *shapeEntry) joined() mem.Buffer {
	e.joinOnce.Do(func() {
		n := 0
		for _, r := range e.res {
			n += len(r.framed)
		}
		b := make([]byte, 0, n)
		for _, r := range e.res {
			b = append(b, r.framed...)
		}
		e.joinBuf = mem.SliceBuffer(b)
	})
	return e.joinBuf
}

func (c *conn) generateShape(pc *push.PushContext, typeURL string, names []string, req *push.Request) ([]*encoded, func() mem.Buffer, error) {
	sc := c.s.shapes
	k := newShapeKey(pc, typeURL, c.proxy, names)
	sc.mu.Lock()
	if k.push > sc.push {
		sc.push, sc.m = k.push, map[shapeKey]*shapeEntry{}
	}
	var e *shapeEntry
	owner := false
	if k.push == sc.push {
		if e = sc.m[k]; e == nil {
			e = &shapeEntry{done: make(chan struct{}), names: names}
			sc.m[k] = e
			owner = true
		} else if !slices.Equal(e.names, names) {
			e = nil // a hash collision: generate without the cache
		}
	}
	sc.mu.Unlock()
	if e == nil { // an older snapshot than the cache's: no caching
		res, err := c.encode(typeURL, gen.Input{Push: pc, Proxy: k.proxy(), Names: names, Request: req})
		return res, nil, err
	}
	if owner {
		e.res, e.err = c.encode(typeURL, gen.Input{Push: pc, Proxy: k.proxy(), Names: names, Request: req})
		close(e.done)
	} else {
		<-e.done
	}
	if c.s.assert {
		fresh, err := c.encode(typeURL, gen.Input{Push: pc, Proxy: c.proxy, Names: names, Request: req})
		if err != nil || !sameEncoded(fresh, e.res) {
			c.s.cacheMismatch(fmt.Sprintf("baremesh cache assert: %s for proxy %s differs from the cached output of its key: the key misses an input (err %v)", shortType(typeURL), c.proxy.ID, err))
		}
	}
	return e.res, e.joined, e.err
}

func sameEncoded(a, b []*encoded) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].name != b[i].name || a[i].sum != b[i].sum {
			return false
		}
	}
	return true
}
