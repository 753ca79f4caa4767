package scope

import (
	"strings"

	"github.com/baremesh/baremesh/core/model"
)

// Listen says how a sidecar's outbound listener serves a service port.
type Listen int

// Outbound listener kinds.
const (
	// ListenTCP: a tcp_proxy on "ADDR_PORT" (or "0.0.0.0_PORT" without
	// an address).
	ListenTCP Listen = iota
	// ListenHTTP: an HTTP connection manager on "0.0.0.0_PORT" with RDS
	// route config "PORT".
	ListenHTTP
	// ListenTLS: SNI-matched tcp_proxy chains on "ADDR_PORT".
	ListenTLS
	// ListenAuto: protocol sniffing on "ADDR_PORT": HTTP to RDS
	// "host:port", anything else to tcp_proxy; without an address on
	// "0.0.0.0_PORT" with RDS "PORT", as Istio shares it.
	ListenAuto
	// ListenNone: not served (UDP).
	ListenNone
)

// ListenerProtocol decides how a port is served. An auto-detected port
// is sniffed whether or not its service has an address; the listener's
// address and route config name follow the address (ListenAuto).
func ListenerProtocol(p model.Port) Listen {
	switch {
	case p.Protocol.IsHTTP():
		return ListenHTTP
	case p.Protocol == model.HTTPS || p.Protocol == model.TLS:
		return ListenTLS
	case p.Protocol == model.UDP:
		return ListenNone
	case p.Protocol == model.Unsupported:
		return ListenAuto
	}
	return ListenTCP
}

// Addresses are a service's addresses as proxy sees them, istiod's
// Service.GetAddressForProxy: the declared ones; the allocated one only
// for a proxy that asks for it (Proxy.DNSAutoAllocate), since only such
// a proxy resolves the service's name to it. To any other proxy a
// service without declared addresses has none: its TCP ports share the
// "0.0.0.0_PORT" listener and no virtual host lists an address of it.
// The returned slice is the service's and must not be altered.
func Addresses(proxy *model.Proxy, svc *model.Service) []string {
	if svc.AutoAllocated && !proxy.DNSAutoAllocate {
		return nil
	}
	return svc.Addresses
}

// ServiceAddress is the first IPv4 address of a service as proxy sees it
// (Addresses) usable as a listener address, or "" (CIDRs and wildcard
// hosts have none).
func ServiceAddress(proxy *model.Proxy, svc *model.Service) string {
	if strings.HasPrefix(svc.Hostname, "*") {
		return ""
	}
	for _, a := range Addresses(proxy, svc) {
		if UsableAddress(a) {
			return a
		}
	}
	return ""
}

// UsableAddress reports whether a service address is an IPv4 address
// (no CIDR, no IPv6), as ServiceAddress picks them.
func UsableAddress(a string) bool {
	return !strings.Contains(a, "/") && !strings.Contains(a, ":")
}
