package rds

import (
	"slices"
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/scope"
)

// gatewayRoutes builds a router's route configs. Once per generation it
// groups the router's HTTP servers by route name and indexes the
// VirtualServices bound to their gateways; the Envoy routes of each
// VirtualService are built once per port and gateway they differ by
// (routesFor) and shared by every virtual host and route config that
// lists them.
type gatewayRoutes struct {
	v *scope.View
	// servers[byName[name]] are the HTTP servers of route config name, in
	// port then Gateway order.
	byName  map[string]int32
	servers [][]scope.GatewayServer
	// vss are the VirtualServices bound to a gateway of a server, in
	// snapshot order; byGateway lists, per gateway "ns/name", the indexes
	// in vss of those bound to it, in order; memo holds what was built
	// of each.
	vss       []*config.Config
	byGateway map[string][]int32
	memo      []vsMemo
}

func newGatewayRoutes(v *scope.View) *gatewayRoutes {
	g := &gatewayRoutes{v: v}
	g.groupServers()
	g.indexVirtualServices()
	g.memo = make([]vsMemo, len(g.vss))
	return g
}

// groupServers fills byName and servers, the servers of all route
// configs in one array.
func (g *gatewayRoutes) groupServers() {
	ports, byPort := scope.GatewayServers(g.v.Push, g.v.Proxy)
	n := 0
	for _, p := range ports {
		n += len(byPort[p])
	}
	g.byName = make(map[string]int32, n)
	var counts []int32
	for _, p := range ports {
		for _, s := range byPort[p] {
			if !s.IsHTTP() {
				continue
			}
			i, ok := g.byName[s.RouteName]
			if !ok {
				i = int32(len(counts))
				g.byName[s.RouteName] = i
				counts = append(counts, 0)
			}
			counts[i]++
		}
	}
	all := make([]scope.GatewayServer, 0, n)
	g.servers = make([][]scope.GatewayServer, len(counts))
	for i, c := range counts {
		g.servers[i] = all[len(all) : len(all) : len(all)+int(c)]
		all = all[:len(all)+int(c)]
	}
	for _, p := range ports {
		for _, s := range byPort[p] {
			if s.IsHTTP() {
				i := g.byName[s.RouteName]
				g.servers[i] = append(g.servers[i], s)
			}
		}
	}
}

// indexVirtualServices fills vss and byGateway for the gateways of the
// HTTP servers: one pass over the snapshot's VirtualServices, the lists
// cut from one array.
func (g *gatewayRoutes) indexVirtualServices() {
	n := 0
	for _, ss := range g.servers {
		n += len(ss)
	}
	gws := make(map[string]int32, n)
	var names []string
	for _, ss := range g.servers {
		for _, s := range ss {
			if _, ok := gws[s.Gateway]; !ok {
				gws[s.Gateway] = int32(len(names))
				names = append(names, s.Gateway)
			}
		}
	}
	if len(names) == 0 {
		return
	}
	type binding struct{ gw, vs int32 }
	var bindings []binding
	counts := make([]int32, len(names))
	var buf [128]byte
	// Oldest first (push.ConfigsByAge): istiod merges the routes of
	// several VirtualServices on one host in that order.
	for _, c := range g.v.VirtualServicesByAge() {
		vsIndex := int32(-1)
		for _, gw := range c.Spec.(*networking.VirtualService).GetGateways() {
			if gw == "mesh" {
				continue
			}
			var gi int32
			var ok bool
			switch {
			case strings.HasPrefix(gw, "./") || !strings.Contains(gw, "/") && strings.Contains(gw, "."):
				gi, ok = gws[config.ResolveGatewayName(gw, c.Namespace)] // rare forms
			case strings.Contains(gw, "/"):
				gi, ok = gws[gw]
			default: // "name" is the VirtualService's namespace's
				b := append(append(append(buf[:0], c.Namespace...), '/'), gw...)
				gi, ok = gws[string(b)]
			}
			if !ok {
				continue
			}
			if vsIndex < 0 {
				vsIndex = int32(len(g.vss))
				g.vss = append(g.vss, c)
			}
			bindings = append(bindings, binding{gi, vsIndex})
			counts[gi]++
		}
	}
	idx := make([]int32, 0, len(bindings))
	lists := make([][]int32, len(names))
	for i, c := range counts {
		lists[i] = idx[len(idx) : len(idx) : len(idx)+int(c)]
		idx = idx[:len(idx)+int(c)]
	}
	for _, b := range bindings {
		lists[b.gw] = append(lists[b.gw], b.vs)
	}
	g.byGateway = make(map[string][]int32, len(names))
	for i, n := range names {
		g.byGateway[n] = lists[i]
	}
}

// vsMemo is what one generation built of a VirtualService on a router:
// its routes per port and gateway, keyed by 0 and "" where they cannot
// differ (see independence). Most are built once or twice.
type vsMemo struct {
	checked bool
	// portFree: the routes are the same on every port; gatewayFree: the
	// same through every gateway of the router; actionsFree: the actions
	// are the same on every port (every destination's port is fixed).
	portFree, gatewayFree, actionsFree bool
	built                              bool // first holds a build
	first                              builtRoutes
	more                               []builtRoutes
	// acts are the actions built so far, when later builds (for another
	// port or gateway) can share them.
	acts *actions
	// hosts are the VirtualService's hosts made FQDN, once asked.
	hosts []string
}

// hostsOf returns the hosts of vss[i] made FQDN (short ones are relative
// to its namespace), computed once: every server and route config that
// lists the VirtualService walks them. The list is the spec's when no
// host changes.
func (g *gatewayRoutes) hostsOf(i int32) []string {
	m := &g.memo[i]
	if m.hosts != nil {
		return m.hosts
	}
	c := g.vss[i]
	hs := c.Spec.(*networking.VirtualService).GetHosts()
	out, copied := hs, false
	for j, h := range hs {
		if f := g.v.FQDN(h, c.Namespace); f != h {
			if !copied {
				out, copied = slices.Clone(hs), true
			}
			out[j] = f
		}
	}
	if out == nil {
		out = []string{} // none, but known
	}
	m.hosts = out
	return out
}

// builtRoutes are the routes of one build, with its memo key.
type builtRoutes struct {
	gateway string
	routes  []*routev3.Route
	port    uint32
}

// routesFor returns the routes of vss[i] on port through gateway, built
// on first use. The slice is clipped to its length, so that a virtual
// host appending to it copies it instead of writing into another's.
func (g *gatewayRoutes) routesFor(i int32, port uint32, gateway string, tls bool) []*routev3.Route {
	c, m := g.vss[i], &g.memo[i]
	if !m.checked {
		m.checked = true
		m.portFree, m.gatewayFree, m.actionsFree = g.independence(c)
	}
	kp, kg := port, gateway
	if tls {
		kg += "\x00tls" // a server's TLS changes redirects (independence)
	}
	if m.portFree {
		kp = 0
	}
	if m.gatewayFree {
		kg = ""
	}
	if m.built && m.first.port == kp && m.first.gateway == kg {
		return m.first.routes
	}
	for _, b := range m.more {
		if b.port == kp && b.gateway == kg {
			return b.routes
		}
	}
	rb := routeBuilder{v: g.v, port: port, gateway: gateway, tls: tls}
	var acts *actions
	if m.actionsFree && !(m.portFree && m.gatewayFree) { // may be built again
		if m.acts == nil {
			m.acts = &actions{}
		}
		acts = m.acts
	}
	routes := rb.vsRoutes(c, acts)
	routes = routes[:len(routes):len(routes)]
	b := builtRoutes{port: kp, gateway: kg, routes: routes}
	if !m.built {
		m.first, m.built = b, true
	} else {
		m.more = append(m.more, b)
	}
	return routes
}

// independence reports whether a VirtualService's routes are the same
// on every port and through every gateway of the router. The listener
// port reaches a route only through match ports and destPort (a
// destination without a port to a host that is not a single-port
// service); the gateway only through match gateways (never "mesh" on a
// router, so source labels are not checked). The actions are the same on
// every port when no destination depends on it.
func (g *gatewayRoutes) independence(c *config.Config) (portFree, gatewayFree, actionsFree bool) {
	portFree, gatewayFree, actionsFree = true, true, true
	for _, hr := range c.Spec.(*networking.VirtualService).GetHttp() {
		if redirectPorted(hr) {
			portFree, gatewayFree = false, false // the port and the server's TLS
		}
		for _, m := range hr.GetMatch() {
			if m.GetPort() != 0 {
				portFree = false
			}
			if len(m.GetGateways()) > 0 {
				gatewayFree = false
			}
		}
		for _, d := range hr.GetRoute() {
			if !g.fixedPort(c.Namespace, d.GetDestination()) {
				portFree, actionsFree = false, false
			}
		}
		for _, mp := range mirrors(hr) {
			if !g.fixedPort(c.Namespace, mp.GetDestination()) {
				portFree, actionsFree = false, false
			}
		}
	}
	return portFree, gatewayFree, actionsFree
}

// fixedPort reports whether destPort gives the same port for d on every
// listener port.
func (g *gatewayRoutes) fixedPort(ns string, d *networking.Destination) bool {
	if d.GetPort().GetNumber() != 0 {
		return true
	}
	svc := g.v.ServiceFor(g.v.FQDN(d.GetHost(), ns))
	return svc != nil && len(svc.Ports) == 1
}

// build makes the route config name: one virtual host per VirtualService
// host selected by a server of the config's servers, the routes of every
// VirtualService for that host merged in order (Istio merges them on
// gateways). Domains are the host alone (ports ignored, as istiod).
func (g *gatewayRoutes) build(name string) *routev3.RouteConfiguration {
	i, ok := g.byName[name]
	if !ok {
		return nil
	}
	// Usually a virtual host per server host: the list sized once.
	n := 0
	for _, s := range g.servers[i] {
		n += len(s.Server.GetHosts())
	}
	rc := sidecarConfig(name, make([]*routev3.VirtualHost, 0, n))
	ix := hostIndex{hint: n, noAttempts: gen.ProxyHeadersOf(g.v.Proxy, g.v.Push.Mesh).NoAttemptCount}
	for _, s := range g.servers[i] {
		port := s.Server.GetPort().GetNumber()
		redirect := s.Server.GetTls().GetHttpsRedirect()
		for _, id := range g.byGateway[s.Gateway] {
			c := g.vss[id]
			vs := c.Spec.(*networking.VirtualService)
			if !scope.Exported(scope.OrDefault(vs.GetExportTo(), g.v.Push.Mesh.GetDefaultVirtualServiceExportTo()), c.Namespace, s.Namespace) {
				continue
			}
			var routes []*routev3.Route
			var ext extension
			for _, h := range intersectHosts(s, c.Namespace, g.hostsOf(id)) {
				if routes == nil {
					if routes = g.routesFor(id, port, s.Gateway, s.Server.GetTls() != nil); len(routes) == 0 {
						break // no HTTP routes for this port
					}
				}
				vh := ix.lookup(rc.VirtualHosts, h)
				if vh == nil {
					if vh = ix.add(rc.VirtualHosts, h, port); vh == nil {
						continue
					}
					rc.VirtualHosts = append(rc.VirtualHosts, vh)
				}
				vh.Routes = ext.extend(vh.Routes, routes)
				if redirect {
					vh.RequireTls = routev3.VirtualHost_ALL
				}
			}
		}
		if redirect {
			// As istiod: every host of an httpsRedirect server answers
			// plain HTTP with a redirect to HTTPS, with routes or not.
			for _, h := range s.Server.GetHosts() {
				if _, after, ok := strings.Cut(h, "/"); ok {
					h = after
				}
				h = strings.ToLower(h)
				vh := ix.lookup(rc.VirtualHosts, h)
				if vh == nil {
					if vh = ix.add(rc.VirtualHosts, h, port); vh == nil {
						continue
					}
					rc.VirtualHosts = append(rc.VirtualHosts, vh)
				}
				vh.RequireTls = routev3.VirtualHost_ALL
			}
		}
	}
	rc.VirtualHosts = collapse(rc.VirtualHosts)
	for _, vh := range rc.VirtualHosts {
		vh.Routes = catchAllLast(vh.Routes)
	}
	if len(rc.VirtualHosts) == 0 && len(g.servers[i]) > 0 {
		// As istiod: a host for every request that answers 404, named
		// after the first server's port.
		port := g.servers[i][0].Server.GetPort().GetNumber()
		rc.VirtualHosts = append(rc.VirtualHosts, &routev3.VirtualHost{Name: gen.HostPort("blackhole", port), Domains: anyDomain})
	}
	return rc
}

// catchAllLast is routes with the catch-all ones (isCatchAll) moved to
// the end, the others in their order, as istiod's SortVHostRoutes for a
// gateway's virtual host: where the VirtualServices merged into one host
// are of different ages, an older one's catch-all must not hide a newer
// one's routes (two HTTPRoutes on a listener, one created a second after
// the other). A new slice when anything moves: routes may share theirs
// with other hosts.
func catchAllLast(routes []*routev3.Route) []*routev3.Route {
	moves, seen := false, false
	for _, r := range routes {
		if isCatchAll(r) {
			seen = true
		} else if seen {
			moves = true
			break
		}
	}
	if !moves {
		return routes
	}
	out := make([]*routev3.Route, 0, len(routes))
	var all []*routev3.Route
	for _, r := range routes {
		if isCatchAll(r) {
			all = append(all, r)
		} else {
			out = append(out, r)
		}
	}
	return append(out, all...)
}

// intersectHosts returns the virtual hosts a VirtualService of namespace
// vsNS with hosts vsHosts gets through server s, as istiod's host
// intersection: for each server host (in order) that covers or is
// covered by a VirtualService host, the more specific of the two, once.
// A "*" VirtualService host on a server of "a.example.com" is served as
// "a.example.com" (a Gateway API route without hostnames on a listener
// with one). Most calls find one host; the common case allocates only
// that slice.
func intersectHosts(s scope.GatewayServer, vsNS string, vsHosts []string) []string {
	var out []string
	for _, sh := range s.Server.GetHosts() {
		if !serverNSMatch(sh, s.Namespace, vsNS) {
			continue
		}
		h := sh
		if i := strings.IndexByte(sh, '/'); i >= 0 {
			h = sh[i+1:]
		}
		for _, vh := range vsHosts {
			var pick string
			switch {
			case scope.HostMatch(h, vh):
				pick = vh
			case scope.HostMatch(vh, h):
				pick = h
			default:
				continue
			}
			if !slices.Contains(out, pick) {
				out = append(out, pick)
			}
		}
	}
	return out
}

// serverNSMatch reports whether server host sh ("ns/host", "./host",
// "*/host" or "host") takes VirtualServices of namespace vsNS.
func serverNSMatch(sh, gwNS, vsNS string) bool {
	i := strings.IndexByte(sh, '/')
	if i < 0 {
		return true
	}
	ns := sh[:i]
	if ns == "." {
		ns = gwNS
	}
	return ns == "*" || ns == vsNS
}
