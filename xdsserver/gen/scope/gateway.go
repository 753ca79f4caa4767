package scope

import (
	"slices"
	"strconv"
	"strings"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/core/push"
	"github.com/baremesh/baremesh/xdsserver/gen"
)

// GatewayServer is one server of a Gateway that selects a router.
type GatewayServer struct {
	// Gateway is "ns/name", the name VirtualServices bind to.
	Gateway   string
	Namespace string
	Server    *networking.Server
	// RouteName is the RDS name for servers that terminate HTTP:
	// "http.PORT" for plain HTTP, "https.PORT.PORTNAME.GATEWAY.NS" for
	// HTTPS terminated at the gateway (Istio's names); empty for TLS
	// passthrough and TCP.
	RouteName string
}

// IsHTTP reports whether the server's traffic reaches an HTTP connection
// manager.
func (s GatewayServer) IsHTTP() bool { return s.RouteName != "" }

// GatewayServers returns the servers of every Gateway selecting the
// router, grouped by port number; the ports sorted.
func GatewayServers(pc *push.PushContext, proxy *model.Proxy) ([]uint32, map[uint32][]GatewayServer) {
	gws := Gateways(pc, proxy)
	// Count first so that each port's list is allocated once, and size
	// the one string every "ns/name" and HTTPS route name is cut from
	// (a name per server would be an allocation per server).
	count := map[uint32]int{}
	size := 0
	for _, c := range gws {
		size += len(c.Namespace) + 1 + len(c.Name)
		for _, srv := range c.Spec.(*networking.Gateway).GetServers() {
			count[srv.GetPort().GetNumber()]++
			size += len("https.") + 10 + len(srv.GetPort().GetName()) + len(c.Name) + len(c.Namespace) + 3
		}
	}
	byPort := make(map[uint32][]GatewayServer, len(count))
	for p, n := range count {
		byPort[p] = make([]GatewayServer, 0, n)
	}
	httpRoute := map[uint32]string{} // "http.PORT", shared by a port's servers
	var names strings.Builder
	names.Grow(size)
	// cut returns what was written since start. Written bytes are never
	// altered, so the substring stays valid however the builder grows.
	cut := func(start int) string { return names.String()[start:] }
	var num [10]byte
	for _, c := range gws {
		gw := c.Spec.(*networking.Gateway)
		start := names.Len()
		names.WriteString(c.Namespace)
		names.WriteByte('/')
		names.WriteString(c.Name)
		name := cut(start)
		for _, srv := range gw.GetServers() {
			port := srv.GetPort().GetNumber()
			gs := GatewayServer{Gateway: name, Namespace: c.Namespace, Server: srv}
			proto := model.ParseProtocol(srv.GetPort().GetProtocol(), srv.GetPort().GetName())
			switch {
			case proto.IsHTTP():
				if gs.RouteName = httpRoute[port]; gs.RouteName == "" {
					gs.RouteName = "http." + gen.PortName(port)
					httpRoute[port] = gs.RouteName
				}
			case proto == model.HTTPS && !IsPassthrough(srv.GetTls()):
				// "https.PORT.PORTNAME.GATEWAY.NS"
				start := names.Len()
				names.WriteString("https.")
				names.Write(strconv.AppendUint(num[:0], uint64(port), 10))
				names.WriteByte('.')
				names.WriteString(srv.GetPort().GetName())
				names.WriteByte('.')
				names.WriteString(c.Name)
				names.WriteByte('.')
				names.WriteString(c.Namespace)
				gs.RouteName = cut(start)
			}
			byPort[port] = append(byPort[port], gs)
		}
	}
	ports := make([]uint32, 0, len(count))
	for p := range count {
		ports = append(ports, p)
	}
	slices.Sort(ports)
	return ports, byPort
}

// ServerHostMatch reports whether a VirtualService host in namespace
// vsNS is selected by a Gateway server host ("ns/host", "./host",
// "*/host" or "host").
func ServerHostMatch(serverHost, gwNS, vsNS, vsHost string) bool {
	ns, h := "*", serverHost
	if i := strings.IndexByte(serverHost, '/'); i >= 0 {
		ns, h = serverHost[:i], serverHost[i+1:]
	}
	if ns == "." {
		ns = gwNS
	}
	if ns != "*" && ns != vsNS {
		return false
	}
	return HostMatch(h, vsHost) || HostMatch(vsHost, h)
}

// FQDN expands a short host of a config in namespace ns as Istio does:
// "reviews" is "reviews.ns.svc.DOMAIN"; names with dots, wildcards and
// IP addresses are kept. A host with a colon is taken for an IPv6
// address (DNS names have none), bracketed or with a zone too, where
// Istio's ResolveShortnameToFQDN, parsing, would expand those two into
// names that match nothing either.
func (v *View) FQDN(host, ns string) string {
	if host == "" || strings.ContainsAny(host, ".*:") {
		return host
	}
	return host + "." + ns + ".svc." + v.ClusterDomain()
}

// AutoPassthrough reports whether a Gateway bound to proxy has an
// AUTO_PASSTHROUGH server (an east-west gateway: it forwards Istio mTLS
// by its SNI, and needs a cluster per service port and subset for it).
func AutoPassthrough(pc *push.PushContext, proxy *model.Proxy) bool {
	for _, gw := range Gateways(pc, proxy) {
		for _, s := range gw.Spec.(*networking.Gateway).GetServers() {
			if s.GetTls().GetMode() == networking.ServerTLSSettings_AUTO_PASSTHROUGH {
				return true
			}
		}
	}
	return false
}

// IsPassthrough reports whether a server's TLS is passed through to the
// backend rather than terminated.
func IsPassthrough(t *networking.ServerTLSSettings) bool {
	return t == nil || t.GetMode() == networking.ServerTLSSettings_PASSTHROUGH || t.GetMode() == networking.ServerTLSSettings_AUTO_PASSTHROUGH
}
