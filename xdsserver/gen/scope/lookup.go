package scope

import (
	"strings"

	"github.com/baremesh/baremesh/core/model"
)

// ServiceFor returns the visible service named host, preferring the one
// in the proxy's namespace when several namespaces declare it; nil if
// none is visible.
func (v *View) ServiceFor(host string) *model.Service {
	var first *model.Service
	for _, s := range v.Push.ServicesByHost(host) {
		if !v.ServiceVisible(s) {
			continue
		}
		if s.Namespace == v.Proxy.Namespace {
			return s
		}
		if first == nil {
			first = s
		}
	}
	return first
}

// DestinationPort picks the service port a route destination means: the
// destination's port if set, else the service's only port, else the port
// the route is served on.
func DestinationPort(svc *model.Service, destPort, listenerPort uint32) (model.Port, bool) {
	if destPort != 0 {
		return svc.Port(destPort)
	}
	if len(svc.Ports) == 1 {
		return svc.Ports[0], true
	}
	return svc.Port(listenerPort)
}

// ClusterDomain is the proxy's cluster DNS suffix ("cluster.local"), from
// its DNS domain "ns.svc.cluster.local".
func (v *View) ClusterDomain() string {
	if v.domain == "" { // computed once: routes ask per service
		v.domain = "cluster.local"
		d := v.Proxy.DNSDomain
		if i := strings.Index(d, ".svc."); i >= 0 {
			v.domain = d[i+len(".svc."):]
		}
	}
	return v.domain
}

// ResolveTarget maps a proxyless gRPC target ("host:port", "host", short
// names like "svc.ns" or "svc" resolved in the proxy's namespace) to a
// visible service and port. The port may be omitted when the service has
// only one.
func (v *View) ResolveTarget(target string) (*model.Service, model.Port, bool) {
	host, portStr := target, ""
	if i := strings.LastIndexByte(target, ':'); i >= 0 && !strings.HasSuffix(target, "]") {
		host, portStr = target[:i], target[i+1:]
	}
	var port uint32
	for _, c := range portStr {
		if c < '0' || c > '9' || port > 65535 {
			return nil, model.Port{}, false
		}
		port = port*10 + uint32(c-'0')
	}
	svc := v.ServiceFor(host)
	if svc == nil {
		domain := v.ClusterDomain()
		for _, cand := range candidates(host, v.Proxy.Namespace, domain) {
			if svc = v.ServiceFor(cand); svc != nil {
				break
			}
		}
	}
	if svc == nil {
		return nil, model.Port{}, false
	}
	if port == 0 {
		if len(svc.Ports) != 1 {
			return nil, model.Port{}, false
		}
		return svc, svc.Ports[0], true
	}
	p, ok := svc.Port(port)
	return svc, p, ok
}

// candidates expands a short name as Kubernetes DNS search paths would.
func candidates(host, ns, domain string) []string {
	switch strings.Count(host, ".") {
	case 0:
		return []string{host + "." + ns + ".svc." + domain}
	case 1:
		return []string{host + ".svc." + domain}
	case 2:
		if strings.HasSuffix(host, ".svc") {
			return []string{host + "." + domain}
		}
	}
	return nil
}

// UsesEDS reports whether the proxy's clusters of svc take their
// endpoints from EDS: a client-side load-balanced service's, and on a
// gateway a passthrough one's (resolution NONE) too, as istiod's
// convertResolution: a gateway has no original destination to connect
// to (an ORIGINAL_DST cluster would send it to its own listener).
func UsesEDS(p *model.Proxy, svc *model.Service) bool {
	switch svc.Resolution {
	case model.ClientSideLB:
		return true
	case model.Passthrough:
		return p.Type == model.Router && !p.Proxyless
	}
	return false
}
