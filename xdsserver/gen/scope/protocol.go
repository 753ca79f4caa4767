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
	// "host:port", anything else to tcp_proxy.
	ListenAuto
	// ListenNone: not served (UDP).
	ListenNone
)

// ListenerProtocol decides how a port is served. An auto-detected port
// of a service without an address is served as TCP: without a
// destination address there is nothing to tell services apart but the
// port, and sniffing on a shared wildcard listener is not done here.
func ListenerProtocol(svc *model.Service, p model.Port) Listen {
	switch {
	case p.Protocol.IsHTTP():
		return ListenHTTP
	case p.Protocol == model.HTTPS || p.Protocol == model.TLS:
		return ListenTLS
	case p.Protocol == model.UDP:
		return ListenNone
	case p.Protocol == model.Unsupported && ServiceAddress(svc) != "":
		return ListenAuto
	}
	return ListenTCP
}

// ServiceAddress is the first IPv4 address of a service (declared or
// allocated) usable as a listener address, or "" (CIDRs and wildcard
// hosts have none).
func ServiceAddress(svc *model.Service) string {
	if strings.HasPrefix(svc.Hostname, "*") {
		return ""
	}
	for _, a := range svc.Addresses {
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
