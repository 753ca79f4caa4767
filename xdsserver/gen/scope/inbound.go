package scope

import (
	"net/netip"
	"slices"
	"strings"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/core/push"

	networking "istio.io/api/networking/v1alpha3"
)

// Instance is one service port the proxy's own workload serves.
type Instance struct {
	Service *model.Service
	Port    model.Port
	// TargetPort is the port the workload listens on.
	TargetPort uint32
	// Endpoint is a Sidecar ingress listener's defaultEndpoint
	// ("127.0.0.1:8080", "unix:///path"); empty for an instance of a
	// service, whose traffic goes to its original destination.
	Endpoint string
	// Sidecar is the Sidecar whose ingress listener this is (nil for an
	// instance of a service). Its Service is then the service the proxy
	// serves on that target port, else one made up as istiod's
	// findOrCreateService makes it: mesh-external, named after the
	// Sidecar ("NAME.NAMESPACE").
	Sidecar *config.Config
}

// TelemetryHost is the host the instance's chains are named after in
// telemetry (decorators, inbound stat names): the service's, or for a
// Sidecar ingress listener "SIDECAR.NAMESPACE" in the proxy's namespace,
// as istiod's synthetic instance hostname.
func (i Instance) TelemetryHost(proxyNamespace string) string {
	if i.Sidecar != nil {
		return i.Sidecar.Name + "." + proxyNamespace
	}
	if i.Service != nil {
		return i.Service.Hostname
	}
	return ""
}

// Inbound returns the ports the proxy serves. A sidecar whose Sidecar
// has ingress listeners serves those and nothing else (see
// sidecarIngress). Otherwise: every port of a service with an endpoint
// at one of the proxy's IPs (its target port from that endpoint), or
// whose workload selector matches the proxy's labels (in the proxy's
// namespace). One Instance per target port, the first service (in
// snapshot order) winning, sorted by target port.
func Inbound(pc *push.PushContext, proxy *model.Proxy) []Instance {
	if proxy.Type == model.SidecarProxy {
		if sc := SidecarConfigFor(pc, proxy); sc != nil && len(sc.Spec.(*networking.Sidecar).GetIngress()) > 0 {
			return sidecarIngress(sc, proxy.Namespace, serviceInstances(pc, proxy))
		}
	}
	return serviceInstances(pc, proxy)
}

// serviceInstances is Inbound without a Sidecar's ingress listeners.
func serviceInstances(pc *push.PushContext, proxy *model.Proxy) []Instance {
	var out []Instance
	seen := map[uint32]bool{}
	add := func(s *model.Service, p model.Port, target uint32) {
		if target == 0 || seen[target] {
			return
		}
		seen[target] = true
		out = append(out, Instance{Service: s, Port: p, TargetPort: target})
	}
	at := servedAt(pc, proxy.IPs)
	for _, s := range pc.Services() {
		if len(s.Selector) > 0 && s.Namespace == proxy.Namespace && len(proxy.Labels) > 0 && LabelsMatch(s.Selector, proxy.Labels) {
			for _, p := range s.Ports {
				t := p.TargetPort
				if t == 0 {
					t = p.Number
				}
				add(s, p, t)
			}
			continue
		}
		for _, r := range at[s.Key()] {
			if p, ok := portByName(s, r.PortName); ok {
				add(s, p, r.Port)
			}
		}
	}
	slices.SortFunc(out, func(a, b Instance) int { return int(a.TargetPort) - int(b.TargetPort) })
	return out
}

// servedAt is, by service, the service ports with an endpoint at one of
// ips, in the order of the service's endpoints (address, port, port
// name), from the endpoint index's address index: merging and sorting
// every service's endpoints to find them was most of the cost of a
// proxy's inbound side.
func servedAt(pc *push.PushContext, ips []string) map[model.ServiceKey][]model.AddrRef {
	type atRef struct {
		addr string
		model.AddrRef
	}
	var by map[model.ServiceKey][]atRef
	for _, ip := range ips {
		for _, r := range pc.Endpoints.At(ip) {
			if by == nil {
				by = map[model.ServiceKey][]atRef{}
			}
			by[r.Service] = append(by[r.Service], atRef{ip, r})
		}
	}
	out := make(map[model.ServiceKey][]model.AddrRef, len(by))
	for k, refs := range by {
		slices.SortStableFunc(refs, func(a, b atRef) int {
			if c := strings.Compare(a.addr, b.addr); c != 0 {
				return c
			}
			if a.Port != b.Port {
				return int(a.Port) - int(b.Port)
			}
			return strings.Compare(a.PortName, b.PortName)
		})
		for _, r := range refs {
			out[k] = append(out[k], r.AddrRef)
		}
	}
	return out
}

// sidecarIngress is one Instance per ingress listener of sc, in its
// order, a port named twice kept once (the first). As istiod with
// PILOT_SIDECAR_SERVICE_INBOUND_LISTENER_MERGE off (its default), they
// replace the service instances entirely: a port the workload's services
// name but the Sidecar does not is passed through (istio/istio
// pilot/pkg/networking/core/listener_inbound.go buildInboundChainConfigs,
// cluster.go buildInboundClustersFromSidecar). The cluster of port N is
// "inbound|N||" and its traffic goes to the defaultEndpoint; its service
// is the one of served (the proxy's service instances) on target port N,
// else a mesh-external one named after the Sidecar (istiod's
// findOrCreateService; in the proxy's namespace, as istiod's sidecar
// scope of a root-namespace Sidecar). The ingress listener's tls, bind
// and captureMode are not supported.
func sidecarIngress(sc *config.Config, namespace string, served []Instance) []Instance {
	ingress := sc.Spec.(*networking.Sidecar).GetIngress()
	out := make([]Instance, 0, len(ingress))
	var made *model.Service
	for _, in := range ingress {
		n := in.GetPort().GetNumber()
		if n == 0 || slices.ContainsFunc(out, func(i Instance) bool { return i.TargetPort == n }) {
			continue
		}
		p := model.Port{Name: in.GetPort().GetName(), Number: n, TargetPort: n,
			Protocol: model.ParseProtocol(in.GetPort().GetProtocol(), in.GetPort().GetName())}
		i := Instance{Port: p, TargetPort: n, Endpoint: in.GetDefaultEndpoint(), Sidecar: sc}
		if at := slices.IndexFunc(served, func(s Instance) bool { return s.TargetPort == n }); at >= 0 {
			i.Service = served[at].Service
		} else {
			if made == nil {
				made = &model.Service{Hostname: sc.Name + "." + namespace, Namespace: namespace, MeshExternal: true,
					Source: config.Key{Kind: config.Sidecar, Namespace: namespace, Name: sc.Name}}
			}
			i.Service = made
		}
		out = append(out, i)
	}
	slices.SortFunc(out, func(a, b Instance) int { return int(a.TargetPort) - int(b.TargetPort) })
	return out
}

// GlobalUnicastIP is the first of ips that is a global unicast address
// (istiod's GlobalUnicastIP), "" when none is.
func GlobalUnicastIP(ips []string) string {
	for _, ip := range ips {
		if a, err := netip.ParseAddr(ip); err == nil && a.IsGlobalUnicast() {
			return a.String()
		}
	}
	return ""
}

func portByName(s *model.Service, name string) (model.Port, bool) {
	for _, p := range s.Ports {
		if p.Name == name {
			return p, true
		}
	}
	return model.Port{}, false
}

// Gateways returns the Gateways whose selector matches the router's
// labels, in snapshot order. Istio matches a Gateway's selector against
// workloads in every namespace by default (PILOT_SCOPE_GATEWAY_TO_NAMESPACE
// off); so does this. The configs are the snapshot's and must not be
// altered.
func Gateways(pc *push.PushContext, proxy *model.Proxy) []*config.Config {
	all := pc.Configs(config.Gateway)
	var out []*config.Config
	for i := range all {
		gw := all[i].Spec.(*networking.Gateway)
		// A Gateway converted from the Gateway API binds only proxies in
		// its own namespace, as istiod binds it only to its service's
		// instances there (its listeners carry that namespace's routes
		// and certificates).
		if all[i].Annotations["internal.istio.io/gateway-semantics"] == "gateway" && all[i].Namespace != proxy.Namespace {
			continue
		}
		if len(gw.GetSelector()) > 0 && LabelsMatch(gw.GetSelector(), proxy.Labels) {
			if out == nil {
				out = make([]*config.Config, 0, len(all)-i)
			}
			out = append(out, &all[i])
		}
	}
	return out
}

// InboundConnectionPool is the connection pool the proxy's Sidecar sets
// for its inbound port (the ingress listener's of that port, else the
// Sidecar's inboundConnectionPool), as istiod's
// InboundConnectionPoolForPort; nil when none.
func (v *View) InboundConnectionPool(port uint32) *networking.ConnectionPoolSettings {
	for _, in := range v.sidecar.GetIngress() {
		if in.GetPort().GetNumber() == port && in.GetConnectionPool() != nil {
			return in.GetConnectionPool()
		}
	}
	return v.sidecar.GetInboundConnectionPool()
}
