package rds

import (
	"net/netip"
	"slices"
	"strconv"
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/scope"
)

// vhostBuilder collects the virtual hosts of one sidecar route config.
// The domains it claimed (see domainSet) are exactly those of hosts: a
// claim that takes nothing adds no host.
type vhostBuilder struct {
	rb      routeBuilder
	domains domainSet
	hosts   []*routev3.VirtualHost
	// attempts, xfh: the proxy's proxyHeaders: x-envoy-attempt-count
	// (include_request_attempt_count) and X-Forwarded-Host on the
	// catch-all route.
	attempts, xfh bool
	// shared holds, when the generation builds both "PORT" and
	// "host:port" configs, the virtual host of each auto-detected service
	// port with an address already built with all its domains: the same
	// in both configs when its domains are free in both. Nil otherwise.
	shared map[servicePort]*routev3.VirtualHost
}

// servicePort keys a service's virtual host on a port.
type servicePort struct {
	svc  *model.Service
	port uint32
}

// newVhostBuilder starts a config on port expected to hold about hosts
// virtual hosts with about names names (domains without their ":port"
// forms).
func newVhostBuilder(v *scope.View, port uint32, hosts, names int, shared map[servicePort]*routev3.VirtualHost) vhostBuilder {
	ph := gen.ProxyHeadersOf(v.Proxy, v.Push.Mesh)
	return vhostBuilder{
		attempts: !ph.NoAttemptCount, xfh: ph.XForwardedHost,
		rb:      routeBuilder{v: v, port: port, gateway: "mesh"},
		domains: domainSet{port: port, hint: names},
		hosts:   make([]*routev3.VirtualHost, 0, hosts), shared: shared,
	}
}

func (b *vhostBuilder) claim(domains []string) []string { return b.domains.claim(b.hosts, domains) }

func (b *vhostBuilder) claimAll(domains []string) bool { return b.domains.claimAll(b.hosts, domains) }

// defaultHost is the virtual host of a service without a VirtualService,
// allocated with its one route and room for its domains as one block
// (the domains fit in the block's size class).
type defaultHost struct {
	vh      routev3.VirtualHost
	routes  [1]*routev3.Route
	route   forwardRoute
	domains [4]string
}

// serviceHost is the virtual host of a service with a VirtualService,
// allocated with room for its domains (in its size class).
type serviceHost struct {
	vh      routev3.VirtualHost
	domains [4]string
}

// service adds the virtual host of one service on the builder's port:
// its VirtualService's routes, else the default route. sharable says the
// service port may be in another config of the generation (see shared).
func (b *vhostBuilder) service(svc *model.Service, sharable bool) {
	port := b.rb.port
	key := servicePort{svc, port}
	var vh *routev3.VirtualHost
	if sharable = sharable && b.shared != nil; sharable {
		vh = b.shared[key]
	}
	if vh != nil {
		if b.claimAll(vh.Domains) {
			b.hosts = append(b.hosts, vh)
			return
		}
		// Some domains are taken: a copy with the others, same routes.
		if domains := b.claim(slices.Clone(vh.Domains)); len(domains) > 0 {
			b.hosts = append(b.hosts, &routev3.VirtualHost{Name: vh.Name, Domains: domains, Routes: vh.Routes, IncludeRequestAttemptCount: b.attempts})
		}
		return
	}
	vs := b.rb.v.VirtualServiceFor(svc.Hostname)
	var routes []*routev3.Route
	if vs != nil {
		// A VirtualService with no HTTP route on this port (tls:/tcp:
		// only, or matches on other ports) leaves the service its default
		// route, as istiod (its virtual host for the VirtualService is
		// dropped and the service built as one without).
		if routes = b.rb.vsRoutes(vs, nil); len(routes) == 0 {
			vs = nil
		}
	}
	var dh *defaultHost
	var sh *serviceHost
	var buf []string
	if vs == nil {
		dh = &defaultHost{}
		buf = dh.domains[:0]
	} else {
		sh = &serviceHost{}
		buf = sh.domains[:0]
	}
	var all []string
	var name, cluster string
	if b.rb.proxyless {
		all, name, cluster = grpcServiceDomains(b.rb.v, svc, port)
	} else {
		all, name, cluster = serviceDomains(b.rb.v, svc, port, vs == nil, buf)
	}
	n := len(all)
	domains := b.claim(all)
	if len(domains) == 0 {
		return
	}
	if vs != nil {
		sh.vh.Name, sh.vh.Domains, sh.vh.Routes = name, domains, routes
		sh.vh.IncludeRequestAttemptCount = b.attempts
		vh = &sh.vh
	} else {
		dh.routes[0] = b.rb.defaultRoute(&dh.route, cluster, svc.Hostname)
		dh.vh.Name, dh.vh.Domains, dh.vh.Routes = name, domains, dh.routes[:]
		dh.vh.IncludeRequestAttemptCount = b.attempts
		vh = &dh.vh
	}
	b.hosts = append(b.hosts, vh)
	if sharable && len(domains) == n {
		b.shared[key] = vh
	}
}

// vsOnlyHosts adds virtual hosts for VirtualService hosts that are no
// visible service (external names, wildcards), as Istio does. Hosts of
// services were covered by service (every visible service is found by
// ServiceFor); seen holds the others already considered.
func (b *vhostBuilder) vsOnlyHosts() {
	v := b.rb.v
	var seen map[string]bool
	for _, c := range v.VirtualServices() {
		for _, h := range c.Spec.(*networking.VirtualService).GetHosts() {
			h = v.FQDN(h, c.Namespace)
			if seen[h] || v.ServiceFor(h) != nil {
				continue
			}
			if b.rb.port != 80 && !selectsService(v, c, b.rb.port) {
				break // none of c's hosts, on this port
			}
			if seen == nil {
				seen = map[string]bool{}
			}
			seen[h] = true
			routes := b.rb.vsRoutes(c, nil)
			if len(routes) == 0 {
				continue
			}
			name := gen.HostPort(h, b.rb.port)
			// As istiod for a sidecar: the host alone (ports are ignored
			// in host matching), an IPv6 one in brackets; for a proxyless
			// client also "host:port".
			d := h
			if strings.IndexByte(h, ':') >= 0 {
				d = "[" + h + "]"
			}
			list := []string{d}
			if b.rb.proxyless {
				list = append(list, name)
			}
			domains := b.claim(list)
			if len(domains) == 0 {
				continue
			}
			b.hosts = append(b.hosts, &routev3.VirtualHost{Name: name, Domains: domains, Routes: routes, IncludeRequestAttemptCount: b.attempts})
		}
	}
}

// selectsService reports whether a host of the VirtualService c overlaps
// a service served on port. On every port but 80 istiod keeps only such
// VirtualServices for a sidecar's route config (selectVirtualServices,
// "to keep consistent with previous behavior"), so hosts of one naming
// no service get a virtual host on port 80 alone.
func selectsService(v *scope.View, c *config.Config, port uint32) bool {
	for _, h := range c.Spec.(*networking.VirtualService).GetHosts() {
		h = v.FQDN(h, c.Namespace)
		for _, svc := range v.Services {
			if (scope.HostMatch(h, svc.Hostname) || scope.HostMatch(svc.Hostname, h)) && servedOn(v, svc, port) != notServed {
				return true
			}
		}
	}
	return false
}

// catchAllHosts are Istio's catch-all virtual hosts, shared by every
// sidecar route config and never altered: [registryOnly][attempts][xfh]
// ("block_all" answering 502, else "allow_any" to the
// PassthroughCluster; with include_request_attempt_count unless the
// proxy's proxyHeaders turn it off; the route appending X-Forwarded-Host
// when they ask, as istiod's buildCatchAllVirtualHost).
var catchAllHosts = func() (out [2][2][2]*routev3.VirtualHost) {
	for _, attempts := range []bool{false, true} {
		for _, xfh := range []bool{false, true} {
			a, x := b2i(attempts), b2i(xfh)
			out[0][a][x] = &routev3.VirtualHost{Name: "allow_any", Domains: []string{"*"}, Routes: []*routev3.Route{{
				Name: "allow_any", Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
				Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: gen.PassthroughCluster},
					//lint:ignore SA1019 deprecated, what istiod sets
					Timeout: gen.Duration(0), MaxGrpcTimeout: gen.Duration(0), AppendXForwardedHost: xfh}},
			}}, IncludeRequestAttemptCount: attempts}
			out[1][a][x] = &routev3.VirtualHost{Name: "block_all", Domains: []string{"*"}, Routes: []*routev3.Route{{
				Name: "block_all", Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
				Action: &routev3.Route_DirectResponse{DirectResponse: &routev3.DirectResponseAction{Status: 502}},
			}}, IncludeRequestAttemptCount: attempts}
		}
	}
	return out
}()

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// fallback adds Istio's catch-all virtual host: "allow_any" to the
// PassthroughCluster, or "block_all" answering 502 under REGISTRY_ONLY.
// It is the config's last: it claims nothing for later hosts.
func (b *vhostBuilder) fallback() {
	if b.domains.taken(b.hosts, "*") {
		return
	}
	b.hosts = append(b.hosts, catchAllHosts[b2i(b.rb.v.RegistryOnly())][b2i(b.attempts)][b2i(b.xfh)])
}

// serviceNames are the names a service is reached by, as Istio lists
// them: the hostname; for a cluster-local hostname "svc.ns.svc.DOMAIN"
// also "svc.ns.svc", "svc.ns" and, from the same namespace, "svc"; its
// addresses. The short names are substrings of the hostname; the list
// is built in buf when it fits.
func serviceNames(v *scope.View, svc *model.Service, buf *[8]string) []string {
	names := append(buf[:0], svc.Hostname)
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
	return names
}

// serviceDomains are the domains of a service's virtual host as istiod
// lists them for a sidecar, whose route configs ignore the port in host
// matching (ignore_port_in_host_matching, so no ":port" forms): its
// names (serviceNames, IPv6 addresses in brackets) and the hostname's
// absolute form "host." (istio/istio#56007), appended to buf (nil: a new
// array). name is the virtual host's name "host:port"; with cluster,
// cluster is the name of the service port's cluster, for its default
// route. The three strings are cut from one: one allocation per service.
func serviceDomains(v *scope.View, svc *model.Service, port uint32, cluster bool, buf []string) (domains []string, name, clusterName string) {
	var stack [8]string
	names := serviceNames(v, svc, &stack)
	var p [10]byte
	ps := strconv.AppendUint(p[:0], uint64(port), 10)
	h := svc.Hostname
	const outbound = string(gen.Outbound) + "|"
	var b strings.Builder
	b.Grow(2*len(h) + 2 + len(ps) + len(outbound) + len(ps) + 2 + len(h))
	b.WriteString(h)
	b.WriteByte('.')
	abs := b.Len()
	b.WriteString(h) // as gen.HostPort: hostnames hold no ':'
	b.WriteByte(':')
	b.Write(ps)
	end := b.Len()
	if cluster { // as gen.ClusterName(gen.Outbound, port, "", host)
		b.WriteString(outbound)
		b.Write(ps)
		b.WriteString("||")
		b.WriteString(h)
	}
	all := b.String()
	out := buf
	if cap(out) < len(names)+1 {
		out = make([]string, 0, len(names)+1)
	}
	for _, n := range names {
		if strings.IndexByte(n, ':') >= 0 {
			n = "[" + n + "]" // an IPv6 address, as istiod's IPv6Compliant
		}
		out = append(out, n)
	}
	if !isIP(h) {
		out = append(out, all[:abs])
	}
	return out, all[abs:end], all[end:]
}

// isIP reports whether h is an IP address. Hostnames, which is what it
// is given, are told apart without parsing (a failed parse allocates
// its error): an IPv4 address has only digits and dots; a ':' is in no
// hostname but in every IPv6 address.
func isIP(h string) bool {
	if strings.IndexByte(h, ':') >= 0 {
		return true
	}
	for i := 0; i < len(h); i++ {
		if c := h[i]; c != '.' && (c < '0' || c > '9') {
			return false
		}
	}
	_, err := netip.ParseAddr(h)
	return err == nil
}
