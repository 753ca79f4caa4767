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
func GatewayServers(pc *push.PushContext, proxy *gen.Proxy) ([]uint32, map[uint32][]GatewayServer) {
	gws := Gateways(pc, proxy)
	// Count first so that each port's list is allocated once.
	count := map[uint32]int{}
	for _, c := range gws {
		for _, srv := range c.Spec.(*networking.Gateway).GetServers() {
			count[srv.GetPort().GetNumber()]++
		}
	}
	byPort := make(map[uint32][]GatewayServer, len(count))
	for p, n := range count {
		byPort[p] = make([]GatewayServer, 0, n)
	}
	httpRoute := map[uint32]string{} // "http.PORT", shared by a port's servers
	var buf []byte
	for _, c := range gws {
		gw := c.Spec.(*networking.Gateway)
		name := c.Namespace + "/" + c.Name
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
				// "https.PORT.PORTNAME.GATEWAY.NS", built in one allocation.
				buf = append(buf[:0], "https."...)
				buf = strconv.AppendUint(buf, uint64(port), 10)
				buf = append(append(append(append(append(append(buf, '.'), srv.GetPort().GetName()...), '.'), c.Name...), '.'), c.Namespace...)
				gs.RouteName = string(buf)
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
	ns, h, ok := strings.Cut(serverHost, "/")
	if !ok {
		h, ns = serverHost, "*"
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
// "reviews" is "reviews.ns.svc.DOMAIN"; names with dots and wildcards are
// kept.
func (v *View) FQDN(host, ns string) string {
	if host == "" || strings.ContainsAny(host, ".*") {
		return host
	}
	return host + "." + ns + ".svc." + v.ClusterDomain()
}

// IsPassthrough reports whether a server's TLS is passed through to the
// backend rather than terminated.
func IsPassthrough(t *networking.ServerTLSSettings) bool {
	return t == nil || t.GetMode() == networking.ServerTLSSettings_PASSTHROUGH || t.GetMode() == networking.ServerTLSSettings_AUTO_PASSTHROUGH
}
