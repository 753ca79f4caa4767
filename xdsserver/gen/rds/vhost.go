package rds

import (
	"strconv"
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	meshv1alpha1 "istio.io/api/mesh/v1alpha1"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/scope"
)

// vhostBuilder collects the virtual hosts of one sidecar route config.
// Envoy rejects a domain used twice in one config, so the first virtual
// host to claim a domain keeps it.
type vhostBuilder struct {
	rb      routeBuilder
	used    map[string]bool
	covered map[string]bool // hosts with a virtual host
	hosts   []*routev3.VirtualHost
}

func newVhostBuilder(v *scope.View, port uint32) *vhostBuilder {
	return &vhostBuilder{rb: routeBuilder{v: v, port: port, gateway: "mesh"}, used: map[string]bool{}, covered: map[string]bool{}}
}

func (b *vhostBuilder) claim(domains []string) []string {
	out := domains[:0]
	for _, d := range domains {
		if !b.used[d] {
			b.used[d] = true
			out = append(out, d)
		}
	}
	return out
}

// service adds the virtual host of one service on the builder's port:
// its VirtualService's routes, else the default route.
func (b *vhostBuilder) service(svc *model.Service) {
	port := b.rb.port
	all := serviceDomains(b.rb.v, svc, port)
	name := all[1] // "host:port", before claim reuses the slice
	domains := b.claim(all)
	b.covered[svc.Hostname] = true
	if len(domains) == 0 {
		return
	}
	var routes []*routev3.Route
	if vs := b.rb.v.VirtualServiceFor(svc.Hostname); vs != nil {
		routes = b.rb.vsRoutes(vs)
	} else {
		routes = []*routev3.Route{b.rb.defaultRoute(gen.ClusterName(gen.Outbound, port, "", svc.Hostname), svc.Hostname)}
	}
	b.hosts = append(b.hosts, &routev3.VirtualHost{Name: name, Domains: domains, Routes: routes})
}

// vsOnlyHosts adds virtual hosts for VirtualService hosts that are no
// visible service (external names, wildcards), as Istio does.
func (b *vhostBuilder) vsOnlyHosts() {
	v := b.rb.v
	vss := v.VirtualServices()
	for i := range vss {
		c := &vss[i]
		for _, h := range c.Spec.(*networking.VirtualService).GetHosts() {
			h = v.FQDN(h, c.Namespace)
			if b.covered[h] || v.ServiceFor(h) != nil {
				continue
			}
			b.covered[h] = true
			routes := b.rb.vsRoutes(c)
			if len(routes) == 0 {
				continue
			}
			domains := b.claim([]string{h, gen.HostPort(h, b.rb.port)})
			if len(domains) == 0 {
				continue
			}
			b.hosts = append(b.hosts, &routev3.VirtualHost{Name: gen.HostPort(h, b.rb.port), Domains: domains, Routes: routes})
		}
	}
}

// fallback adds Istio's catch-all virtual host: "allow_any" to the
// PassthroughCluster, or "block_all" answering 502 under REGISTRY_ONLY.
func (b *vhostBuilder) fallback() {
	if b.used["*"] {
		return
	}
	b.used["*"] = true
	m := b.rb.v.Push.Mesh
	if m != nil && m.GetOutboundTrafficPolicy().GetMode() == meshv1alpha1.MeshConfig_OutboundTrafficPolicy_REGISTRY_ONLY {
		b.hosts = append(b.hosts, &routev3.VirtualHost{Name: "block_all", Domains: []string{"*"}, Routes: []*routev3.Route{{
			Name: "block_all", Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
			Action: &routev3.Route_DirectResponse{DirectResponse: &routev3.DirectResponseAction{Status: 502}},
		}}})
		return
	}
	b.hosts = append(b.hosts, &routev3.VirtualHost{Name: "allow_any", Domains: []string{"*"}, Routes: []*routev3.Route{{
		Name: "allow_any", Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
		Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: gen.PassthroughCluster}, Timeout: gen.Duration(0)}},
	}}})
}

// serviceDomains are the names a service is reached by on port, as
// Istio lists them: the hostname; for a cluster-local hostname
// "svc.ns.svc.DOMAIN" also "svc.ns.svc", "svc.ns" and, from the same
// namespace, "svc"; its addresses; each also with ":port". The short
// names are substrings of the hostname and the ":port" forms are cut
// from one string: two allocations per service instead of a dozen.
func serviceDomains(v *scope.View, svc *model.Service, port uint32) []string {
	var stack [8]string
	names := append(stack[:0], svc.Hostname)
	// Suffixes are compared piecewise: concatenating them would allocate
	// per service.
	const svcPart = ".svc."
	d := v.ClusterDomain()
	if h := svc.Hostname; len(h) > len(svcPart)+len(d) && strings.HasSuffix(h, d) && strings.HasSuffix(h[:len(h)-len(d)], svcPart) {
		short := h[:len(h)-len(d)-len(svcPart)] // "svc.ns"
		names = append(names, h[:len(short)+len(".svc")], short)
		if ns := v.Proxy.Namespace; len(short) > len(ns)+1 && strings.HasSuffix(short, ns) && short[len(short)-len(ns)-1] == '.' {
			names = append(names, short[:len(short)-len(ns)-1])
		}
	}
	if !strings.HasPrefix(svc.Hostname, "*") {
		for _, a := range scope.Addresses(v.Proxy, svc) {
			if scope.UsableAddress(a) {
				names = append(names, a)
			}
		}
	}
	var p [10]byte
	ps := strconv.AppendUint(p[:0], uint64(port), 10)
	var b strings.Builder
	for _, n := range names {
		b.Grow(len(n) + 3 + len(ps))
	}
	ends := make([]int, 0, len(names))
	for _, n := range names {
		if strings.IndexByte(n, ':') >= 0 { // as gen.HostPort
			b.WriteByte('[')
			b.WriteString(n)
			b.WriteByte(']')
		} else {
			b.WriteString(n)
		}
		b.WriteByte(':')
		b.Write(ps)
		ends = append(ends, b.Len())
	}
	all := b.String()
	out := make([]string, 0, 2*len(names))
	start := 0
	for i, n := range names {
		out = append(out, n, all[start:ends[i]])
		start = ends[i]
	}
	return out
}
