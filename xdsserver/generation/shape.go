package generation

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"google.golang.org/grpc/mem"
	meshv1alpha1 "istio.io/api/mesh/v1alpha1"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/core/push"
	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/eds"
	"github.com/baremesh/baremesh/xdsserver/gen/scope"
	"github.com/baremesh/baremesh/xdsserver/wire"
	"github.com/baremesh/baremesh/xdsserver/xdstype"
)

// shapeKey is every input of a proxy's LDS, CDS or RDS: the snapshot (by
// version), the subscription, and the proxy fields those generators read.
// A proxy's IPs matter only where an endpoint is at one of them (its
// inbound side); then the endpoint index generation is part of the key
// too. Thousands of sidecars that differ only in their address share one
// key, so their config is generated and encoded once.
type shapeKey struct {
	typeURL    string
	push       uint64
	nodeType   model.NodeType
	namespace  string
	dnsDomain  string
	labels     string
	proxyless  bool
	istioProxy bool // telemetry filters and stat names (model.Proxy.IstioProxy)
	// clusterID, meshID, serviceCluster: istio-proxy's tracing names them.
	clusterID, meshID, serviceCluster string
	istioVersion                      string
	// dnsAutoAllocate: whether the proxy sees allocated service
	// addresses (listener addresses, RDS names and domains follow it).
	dnsAutoAllocate bool
	// families: bit 0 IPv4, bit 1 IPv6 among the proxy's IPs (listener
	// addresses follow them).
	families     uint8
	interception string
	// identityNS: the authenticated identity's namespace, "" for none
	// (a gateway's listeners leave out servers whose credentials SDS
	// will not serve it).
	identityNS  string
	topology    model.GatewayTopology
	hasTopology bool
	// headers: the proxyHeaders of the node's PROXY_CONFIG (hasHeaders:
	// it sent one).
	headers    model.ProxyHeaders
	hasHeaders bool
	// inbound: the service ports with an endpoint at the proxy's IPs,
	// address by address (model.EndpointView.At), which is all that its
	// inbound side reads of them: auto-registered VMs serving the same
	// service ports from different addresses share their LDS and CDS.
	inbound   string
	endpoints uint64 // endpoint index generation, when inbound is set
	// ips: a sidecar whose Sidecar has ingress listeners reads its own
	// IPs (chains named after one, lds.ingressBind; a default endpoint
	// at 0.0.0.0 becomes one, cds.ingressEndpoint): all of them.
	ips      string
	names    uint64 // hash of the subscribed names; 0 for wildcard
	wildcard bool
	// efMeta: the node metadata that some EnvoyFilter match reads
	// (Builder.envoyFilterMeta), "" when none does.
	efMeta string
	// netView, network: CDS's DNS clusters' endpoints follow the
	// proxy's REQUESTED_NETWORK_VIEW and, with network gateways in the
	// mesh, its network (as EDS: edsKey).
	netView, network string
	// idle: the node's IDLE_TIMEOUT (LDS: tcp_proxy and connection
	// manager idle timeouts, gen.NodeIdleTimeout).
	idle string
	// part: the side of a sidecar's LDS or CDS (fill).
	part gen.Part
}

func newShapeKey(pc *push.PushContext, typeURL string, p *model.Proxy, names []string) shapeKey {
	k := shapeKey{typeURL: typeURL, push: pc.Version, nodeType: p.Type, namespace: p.Namespace, dnsDomain: p.DNSDomain,
		labels: canonicalLabels(p.Labels), proxyless: p.Proxyless, istioProxy: p.IstioProxy, clusterID: p.ClusterID, meshID: p.MeshID, serviceCluster: p.ServiceCluster, istioVersion: p.IstioVersion, dnsAutoAllocate: p.DNSAutoAllocate,
		wildcard: names == nil, interception: p.InterceptionMode}
	if p.Identity != nil {
		k.identityNS = p.Identity.Namespace
	}
	// Only LDS reads the names istio-proxy's tracing carries
	// (gen/lds/tracing.go), and the service cluster only for an
	// OpenTelemetry tracer. The service cluster is one per pod where the
	// agent names it after the workload: in every key it made each proxy
	// generate its own CDS and RDS on a full push (issue #30).
	if typeURL != xdstype.Listener.URL {
		k.clusterID, k.meshID, k.serviceCluster = "", "", ""
	} else if !otelTracer(pc.Mesh) {
		k.serviceCluster = ""
	}
	k.families = families(p)
	if p.GatewayTopology != nil {
		k.topology, k.hasTopology = *p.GatewayTopology, true
	}
	if p.ProxyHeaders != nil {
		k.headers, k.hasHeaders = *p.ProxyHeaders, true
	}
	// Only LDS and CDS have an inbound side (RDS's routes are outbound;
	// inbound ones are inline in the listeners).
	if typeURL == xdstype.Listener.URL || typeURL == xdstype.Cluster.URL {
		if k.inbound = inboundKey(pc, p.IPs); k.inbound != "" {
			k.endpoints = pc.Endpoints.Generation()
		}
		if p.Type == model.SidecarProxy && len(pc.Configs(config.Sidecar)) > 0 && len(scope.SidecarFor(pc, p).GetIngress()) > 0 {
			k.ips = strings.Join(p.IPs, ",")
		}
	}
	if names != nil {
		k.names = wire.NamesHash(names)
	}
	if typeURL == xdstype.Listener.URL {
		k.idle = p.Metadata[gen.IdleTimeoutMetadata]
	}
	if typeURL == xdstype.Cluster.URL {
		k.netView = p.Metadata[eds.RequestedNetworkView]
		if pc.Networks.Enabled() {
			k.network = p.Network
		}
	}
	return k
}

// inboundKey is shapeKey.inbound for a proxy at ips: for each of them
// with endpoints, in address order, the service ports they serve.
func inboundKey(pc *push.PushContext, ips []string) string {
	var b strings.Builder
	for _, ip := range endpointIPs(pc, ips) {
		if b.Len() > 0 {
			b.WriteByte(';')
		}
		for i, r := range pc.Endpoints.At(ip) {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(r.Service.Namespace)
			b.WriteByte('/')
			b.WriteString(r.Service.Hostname)
			b.WriteByte('|')
			b.WriteString(r.PortName)
			b.WriteByte('|')
			b.WriteString(strconv.FormatUint(uint64(r.Port), 10))
		}
	}
	return b.String()
}

// endpointIPs is those of ips that some endpoint is at, in address order
// (the order the inbound side takes them in, scope.servedAt).
func endpointIPs(pc *push.PushContext, ips []string) []string {
	var out []string
	for _, ip := range ips {
		if pc.Endpoints.HasAddress(ip) && !slices.Contains(out, ip) {
			out = append(out, ip)
		}
	}
	slices.Sort(out)
	return out
}

// otelTracer reports whether the mesh config has an OpenTelemetry
// tracing provider (whose service name is the proxy's service cluster).
func otelTracer(m *meshv1alpha1.MeshConfig) bool {
	for _, p := range m.GetExtensionProviders() {
		if p.GetOpentelemetry() != nil {
			return true
		}
	}
	return false
}

// proxy is the proxy a cached generation sees: the key's fields only.
func (k shapeKey) proxy() *model.Proxy {
	p := &model.Proxy{ID: "cache", Type: k.nodeType, Namespace: k.namespace, DNSDomain: k.dnsDomain,
		Labels: parseLabels(k.labels), Proxyless: k.proxyless, IstioProxy: k.istioProxy, ClusterID: k.clusterID, MeshID: k.meshID, ServiceCluster: k.serviceCluster, IstioVersion: k.istioVersion, DNSAutoAllocate: k.dnsAutoAllocate,
		Metadata: map[string]string{}}
	if k.ips != "" {
		p.IPs = strings.Split(k.ips, ",")
	}
	p.Families = k.families
	p.InterceptionMode = k.interception
	if k.identityNS != "" {
		// Only the namespace of an identity is read (and that it exists).
		p.Identity = &model.Identity{Namespace: k.identityNS}
	}
	if k.hasTopology {
		t := k.topology
		p.GatewayTopology = &t
	}
	if k.hasHeaders {
		h := k.headers
		p.ProxyHeaders = &h
	}
	parseMeta(k.efMeta, p.Metadata)
	p.Network = k.network
	if k.idle != "" {
		p.Metadata[gen.IdleTimeoutMetadata] = k.idle
	}
	if k.netView != "" {
		p.Metadata[eds.RequestedNetworkView] = k.netView
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
	// join is every resource's framing in one buffer (for an output in
	// two parts, the shared part's buffer and one of the inbound part),
	// as SotW ([0]) and as Delta ([1]) frame it, made on first use: a
	// whole set goes out as a few parts that gRPC writes without copying
	// them into frame-sized pieces.
	joinOnce [2]sync.Once
	join     [2]mem.BufferSlice
	done     chan struct{}
	names    []string // the subscription, checked on a hit: the key holds only its hash
	res      []*wire.Resource
	err      error
	cached   bool
	// shared and inbound: the two parts of an output built from them
	// (fill), whose res holds both.
	shared  *shapeEntry
	inbound []*wire.Resource
}

// joined gives the whole output framed for SotW or for Delta, made on
// first use.
func (e *shapeEntry) joined(delta bool) mem.BufferSlice {
	i, join := 0, wire.Joined
	if delta {
		i, join = 1, wire.JoinedDelta
	}
	e.joinOnce[i].Do(func() {
		if e.shared == nil {
			e.join[i] = mem.BufferSlice{join(e.res)}
			return
		}
		e.join[i] = slices.Clone(e.shared.joined(delta))
		if len(e.inbound) > 0 {
			e.join[i] = append(e.join[i], join(e.inbound))
		}
	})
	return e.join[i]
}

// buildShape builds a whole LDS, CDS or RDS output through the cache. In
// assert mode a hit is checked against a fresh generation for the real
// proxy: a difference means the key misses an input.
func (b *Builder) buildShape(pc *push.PushContext, t *xdstype.Type, p *model.Proxy, names []string) ([]*wire.Resource, func(delta bool) mem.BufferSlice, error) {
	k := newShapeKey(pc, t.URL, p, names)
	k.efMeta = b.envoyFilterMeta(pc, p)
	if t == xdstype.Route {
		k.labels = b.sharedLabels(pc, p.Labels) // (RDS has no inbound side)
	}
	in := shapeInput{key: k, pc: pc, names: names}
	if k.inbound != "" && k.ips == "" {
		in.ips = endpointIPs(pc, p.IPs)
	}
	e := b.shaped(t, in, p)
	if !e.cached {
		return e.res, nil, e.err
	}
	return e.res, e.joined, e.err
}

// shaped is in's output through the cache (not cached for an older
// snapshot than the cache's); real, if not nil, is the proxy a hit is
// checked against in assert mode.
func (b *Builder) shaped(t *xdstype.Type, in shapeInput, real *model.Proxy) *shapeEntry {
	sc, k := b.shapes, in.key
	sc.mu.Lock()
	if k.push > sc.push {
		sc.push, sc.m = k.push, map[shapeKey]*shapeEntry{}
	}
	var e *shapeEntry
	owner := false
	if k.push == sc.push {
		if e = sc.m[k]; e == nil {
			e = &shapeEntry{done: make(chan struct{}), names: in.names, cached: true}
			sc.m[k] = e
			owner = true
		} else if !slices.Equal(e.names, in.names) {
			e = nil // a hash collision: generate without the cache
		}
	}
	sc.mu.Unlock()
	if e == nil {
		e = &shapeEntry{names: in.names}
		b.fill(t, in, e)
		return e
	}
	if owner {
		b.fill(t, in, e)
		close(e.done)
	} else {
		<-e.done
	}
	if b.assert && real != nil {
		fresh, err := b.encode(t, gen.Input{Push: in.pc, Proxy: real, Names: in.names, Part: k.part})
		if err != nil || !wire.Same(fresh, e.res) {
			b.mismatch(fmt.Sprintf("baremesh cache assert: %s for proxy %s differs from the cached output of its key: the key misses an input (err %v)", t.Short, real.ID, err))
		}
	}
	return e
}

// shapeInput is a shapeKey with what it names: the snapshot of version
// k.push (pinned, so its endpoints are those of k.endpoints), the
// subscription whose hash is k.names, and addresses serving what
// k.inbound says (those of the proxy that generates it: any proxy with
// that key would serve the same).
type shapeInput struct {
	key   shapeKey
	pc    *push.PushContext
	names []string
	ips   []string
}

// fill is the cached generation: it receives its key (with the
// snapshot, names and addresses the key names) and nothing else. A
// sidecar that serves something gets its LDS and CDS in two parts: the
// shared part through the cache, under a key without what the proxy
// serves and with only the labels that configs select it by (VMs of
// different services have the same), and the inbound part of its own.
func (b *Builder) fill(t *xdstype.Type, in shapeInput, e *shapeEntry) {
	p := in.key.proxy()
	if in.ips != nil {
		p.IPs = in.ips
	}
	if !b.splits(t, in, p) {
		e.res, e.err = b.encode(t, gen.Input{Push: in.pc, Proxy: p, Names: in.names, Part: in.key.part})
		return
	}
	sk := in.key
	sk.inbound, sk.endpoints, sk.part, sk.labels = "", 0, gen.PartShared, b.sharedLabels(in.pc, p.Labels)
	shared := b.shaped(t, shapeInput{key: sk, pc: in.pc}, nil) // (assert mode checks the whole output)
	if shared.err != nil {
		e.err = shared.err
		return
	}
	inbound, err := b.encode(t, gen.Input{Push: in.pc, Proxy: p, Part: gen.PartInbound})
	if err != nil {
		e.err = err
		return
	}
	// Both sorted by name, as every encoded output (wire.Encode).
	res, sres, ires := make([]*wire.Resource, 0, len(shared.res)+len(inbound)), shared.res, inbound
	for len(sres) > 0 && len(ires) > 0 {
		if wire.ByName(sres[0], ires[0]) <= 0 {
			res, sres = append(res, sres[0]), sres[1:]
		} else {
			res, ires = append(res, ires[0]), ires[1:]
		}
	}
	e.res, e.shared, e.inbound = append(append(res, sres...), ires...), shared, inbound
}

// splits reports whether in's output is built from its two parts: a
// wildcard LDS or CDS of an Envoy sidecar that serves something (not by
// a Sidecar's ingress listeners, whose chains read its own IPs) and that
// no EnvoyFilter patches (a patch may read or add across the parts).
func (b *Builder) splits(t *xdstype.Type, in shapeInput, p *model.Proxy) bool {
	k := in.key
	if (t != xdstype.Listener && t != xdstype.Cluster) || k.part != gen.PartAll || k.inbound == "" || k.ips != "" ||
		!k.wildcard || k.nodeType != model.SidecarProxy || k.proxyless {
		return false
	}
	return len(in.pc.Configs(config.EnvoyFilter)) == 0 || b.envoyFilters(in.pc).Select(p) == nil
}
