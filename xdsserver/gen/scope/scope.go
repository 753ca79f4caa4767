// Package scope answers "what does this proxy see" for the generators:
// the services and VirtualServices visible to a proxy (exportTo and
// Sidecar egress hosts, as Istio applies them), the DestinationRule and
// the merged traffic policy for a service port and subset, the service
// instances a proxy serves itself (inbound), the Gateways that select a
// router, and the service a proxyless gRPC target names.
//
// Everything here is a pure function of a PushContext and a Proxy. It
// imports core and xdsserver/gen only.
package scope

import (
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"
	meshv1alpha1 "istio.io/api/mesh/v1alpha1"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/core/push"
)

// View is what one proxy sees of a snapshot. It is computed for one
// generation, used by one goroutine and not shared; its VirtualService
// list and index are built on first use (CDS and most listeners never
// read them), as is its DestinationRule index, after which nothing in it
// changes.
type View struct {
	Push  *push.PushContext
	Proxy *model.Proxy
	// Services are the visible services, in the snapshot's order (empty
	// in a view from NewForLookups).
	Services []*model.Service
	sidecar  *networking.Sidecar
	// egressPorts is set when an egress listener of sidecar has a port.
	egressPorts bool
	vs          *vsIndex
	vsMerged    []*config.Config // VirtualServicesByAge, once made
	dr          drIndex
	domain      string // ClusterDomain, once asked
}

// vsIndex holds the visible VirtualServices bound to "mesh" (sidecars
// only; routers look theirs up per Gateway) and, by host, the first one
// naming it exactly; wild lists the wildcard hosts in order.
type vsIndex struct {
	all   []*config.Config
	exact map[string]int
	wild  []wildHost
}

// New computes the view of proxy on pc.
func New(pc *push.PushContext, proxy *model.Proxy) *View {
	v := NewForLookups(pc, proxy)
	all := pc.Services()
	v.Services = make([]*model.Service, 0, len(all))
	for _, s := range all {
		if v.ServiceVisible(s) {
			v.Services = append(v.Services, s)
		}
	}
	return v
}

// NewForLookups is the view of proxy for looking services up by host
// (ServiceFor, ServiceVisible) and their rules: Services is left empty,
// sparing a filter over every service of the mesh. A router's listeners
// and routes never list services; EDS generation is asked for one
// cluster at a time on a cache miss, and New's filter of 1,000 services
// (and its 9 KB list) was made for each of them (issue #30).
func NewForLookups(pc *push.PushContext, proxy *model.Proxy) *View {
	v := &View{Push: pc, Proxy: proxy}
	if proxy.Type == model.SidecarProxy {
		v.sidecar = SidecarFor(pc, proxy)
		if v.sidecar != nil && len(v.sidecar.GetEgress()) == 0 {
			// A Sidecar without egress imports every service the
			// namespace sees (istiod's default egress listener "*/*").
			sc := proto.Clone(v.sidecar).(*networking.Sidecar)
			sc.Egress = []*networking.IstioEgressListener{{Hosts: []string{"*/*"}}}
			v.sidecar = sc
		}
		v.egressPorts = slices.ContainsFunc(v.sidecar.GetEgress(), func(e *networking.IstioEgressListener) bool { return e.GetPort() != nil })
	}
	return v
}

// VirtualServices returns the visible VirtualServices bound to "mesh"
// (none for routers, which look theirs up per Gateway). The configs are
// the snapshot's and must not be altered.
func (v *View) VirtualServices() []*config.Config { return v.virtualServices().all }

func (v *View) virtualServices() *vsIndex {
	if v.vs == nil {
		v.vs = &vsIndex{}
		if v.Proxy.Type == model.SidecarProxy {
			v.vs.all = v.meshVirtualServices()
			v.indexVirtualServices()
		}
	}
	return v.vs
}

// ServiceVisible reports whether the proxy may see s: exported to its
// namespace and, for a sidecar with a Sidecar resource, named by an
// egress host.
func (v *View) ServiceVisible(s *model.Service) bool {
	if !Exported(OrDefault(s.ExportTo, v.Push.Mesh.GetDefaultServiceExportTo()), s.Namespace, v.Proxy.Namespace) {
		return false
	}
	if v.sidecar == nil {
		return true
	}
	return v.egressAllows(s.Namespace, s.Hostname)
}

func (v *View) egressAllows(ns, host string) bool {
	for _, eg := range v.sidecar.GetEgress() {
		if hostsAllow(eg.GetHosts(), v.Proxy.Namespace, ns, host) {
			return true
		}
	}
	return false
}

// ListenerImports reports whether the proxy's outbound listener on port
// imports s, one of v.Services: under a Sidecar with egress listeners
// bound to ports, s must be named by the hosts of the egress listener
// that port uses (EgressFor). A service imported by another port's
// egress listener only still has its clusters, as in istiod, whose
// SidecarScope services are the union of its egress listeners'.
func (v *View) ListenerImports(s *model.Service, port uint32) bool {
	if !v.egressPorts {
		return true // one catch-all: v.Services are what it imports
	}
	eg := EgressFor(v.sidecar, port)
	return eg != nil && hostsAllow(eg.GetHosts(), v.Proxy.Namespace, s.Namespace, s.Hostname)
}

// EgressFor returns the egress listener of sc that serves port: the
// first whose port number is port, else the first without a port (the
// catch-all), else nil; as istiod's SidecarScope.GetEgressListenerForRDS
// (istio/istio pilot/pkg/model/sidecar.go), which both its outbound
// listeners and their route configs go by. Unix-socket egress listeners
// (port 0, bind "unix://") and bind/captureMode are not supported.
func EgressFor(sc *networking.Sidecar, port uint32) *networking.IstioEgressListener {
	var catchAll *networking.IstioEgressListener
	for _, eg := range sc.GetEgress() {
		switch n := eg.GetPort().GetNumber(); {
		case eg.GetPort() == nil:
			if catchAll == nil {
				catchAll = eg
			}
		case n == port && n != 0:
			return eg
		}
	}
	return catchAll
}

// hostsAllow reports whether an egress listener's hosts ("ns/host",
// "./host", "*/host", "~/host") import host of namespace ns for a proxy
// in proxyNS.
func hostsAllow(hosts []string, proxyNS, ns, host string) bool {
	for _, h := range hosts {
		hns, hh, ok := strings.Cut(h, "/")
		if !ok {
			continue
		}
		switch hns {
		case "~":
			continue
		case ".":
			hns = proxyNS
		}
		if (hns == "*" || hns == ns) && HostMatch(hh, host) {
			return true
		}
	}
	return false
}

// meshVirtualServices are the visible VirtualServices bound to the mesh,
// oldest first (push.ConfigsByAge: where two claim a host, istiod takes
// the oldest), found without copying a config: every sidecar generation
// lists them. Routes converted from the Gateway API in the proxy's own
// namespace come first (istiod's "consumer override": a GAMMA consumer
// route beats the service's producer route for its namespace's proxies).
func (v *View) meshVirtualServices() []*config.Config {
	all := v.VirtualServicesByAge()
	out := make([]*config.Config, 0, len(all))
	// Most meshes have no Gateway API route in the proxy's namespace: the
	// list is then in age order, unpartitioned.
	partition := hasGatewayRoutes(all, v.Proxy.Namespace)
	var later []*config.Config
	for _, c := range all {
		vs := c.Spec.(*networking.VirtualService)
		if gws := vs.GetGateways(); len(gws) > 0 && !slices.Contains(gws, "mesh") {
			continue
		}
		if !Exported(OrDefault(vs.GetExportTo(), v.Push.Mesh.GetDefaultVirtualServiceExportTo()), c.Namespace, v.Proxy.Namespace) {
			continue
		}
		if v.sidecar != nil && !slices.ContainsFunc(vs.GetHosts(), func(h string) bool { return v.egressAllows(c.Namespace, h) || v.egressAllowsPattern(c.Namespace, h) }) {
			continue
		}
		if !partition || c.Namespace == v.Proxy.Namespace && c.Annotations[routeSemantics] == "gateway" {
			out = append(out, c)
			continue
		}
		later = append(later, c)
	}
	return append(out, later...)
}

// routeSemantics marks a VirtualService converted from the Gateway API
// (core/gatewayapi, as istiod).
const routeSemantics = "internal.istio.io/route-semantics"

// hasGatewayRoutes reports whether a Gateway API route of namespace ns
// is among all.
func hasGatewayRoutes(all []*config.Config, ns string) bool {
	for _, c := range all {
		if c.Namespace == ns && c.Annotations[routeSemantics] == "gateway" {
			return true
		}
	}
	return false
}

// egressAllowsPattern lets a wildcard VS host ("*.example.com") through
// when an egress host it covers is allowed.
func (v *View) egressAllowsPattern(ns, pattern string) bool {
	if !strings.HasPrefix(pattern, "*") {
		return false
	}
	for _, eg := range v.sidecar.GetEgress() {
		for _, h := range eg.GetHosts() {
			hns, hh, _ := strings.Cut(h, "/")
			if hns == "." {
				hns = v.Proxy.Namespace
			}
			if (hns == "*" || hns == ns) && HostMatch(pattern, hh) {
				return true
			}
		}
	}
	return false
}

// VirtualServiceFor returns the first of the view's VirtualServices
// that names host (exactly, else by wildcard; short VS hosts are
// relative to the VS's namespace), or nil.
func (v *View) VirtualServiceFor(host string) *config.Config {
	ix := v.virtualServices()
	if i, ok := ix.exact[host]; ok {
		return ix.all[i]
	}
	for _, w := range ix.wild {
		if HostMatch(w.pattern, host) {
			return ix.all[w.vs]
		}
	}
	return nil
}

// indexVirtualServices builds the index VirtualServiceFor reads: every
// service of a sidecar looks its VirtualService up, and scanning every
// host of every VirtualService each time grew as services × hosts.
func (v *View) indexVirtualServices() {
	ix := v.vs
	ix.exact = make(map[string]int, len(ix.all))
	for i, c := range ix.all {
		for _, h := range c.Spec.(*networking.VirtualService).GetHosts() {
			h = v.FQDN(h, c.Namespace)
			if _, dup := ix.exact[h]; !dup {
				ix.exact[h] = i
			}
			if strings.HasPrefix(h, "*") {
				ix.wild = append(ix.wild, wildHost{pattern: h, vs: i})
			}
		}
	}
}

// wildHost is a wildcard VirtualService host, in VirtualService order.
type wildHost struct {
	pattern string
	vs      int
}

// Exported applies Istio's exportTo: empty or "*" is every namespace, "."
// the config's own, "~" none, else the listed namespaces.
func Exported(exportTo []string, configNS, proxyNS string) bool {
	if len(exportTo) == 0 {
		return true
	}
	for _, e := range exportTo {
		switch e {
		case "*":
			return true
		case ".":
			if configNS == proxyNS {
				return true
			}
		default:
			if e == proxyNS {
				return true
			}
		}
	}
	return false
}

// RegistryOnly reports whether the proxy's traffic to no known service
// is blocked: its Sidecar's outboundTrafficPolicy when the Sidecar sets
// one, else the mesh's (istiod's SidecarScope.OutboundTrafficPolicy).
func (v *View) RegistryOnly() bool {
	if p := v.sidecar.GetOutboundTrafficPolicy(); p != nil {
		return p.GetMode() == networking.OutboundTrafficPolicy_REGISTRY_ONLY
	}
	return v.Push.Mesh.GetOutboundTrafficPolicy().GetMode() == meshv1alpha1.MeshConfig_OutboundTrafficPolicy_REGISTRY_ONLY
}

// OrDefault is a resource's exportTo, or when it names none the mesh's
// default for its kind (defaultServiceExportTo,
// defaultVirtualServiceExportTo, defaultDestinationRuleExportTo; unset:
// every namespace).
func OrDefault(exportTo, def []string) []string {
	if len(exportTo) == 0 {
		return def
	}
	return exportTo
}

// HostMatch reports whether host is covered by pattern: equal, "*", or a
// "*.suffix" wildcard. A wildcard host is covered by a broader wildcard.
func HostMatch(pattern, host string) bool {
	if pattern == "*" || pattern == host {
		return true
	}
	if strings.HasPrefix(pattern, "*") {
		suffix := pattern[1:] // ".example.com"
		if strings.HasPrefix(host, "*") {
			return strings.HasSuffix(host[1:], suffix)
		}
		return strings.HasSuffix(host, suffix)
	}
	return false
}

// LabelsMatch reports whether every selector label is in labels. An
// empty selector matches everything.
func LabelsMatch(selector, labels map[string]string) bool {
	for k, v := range selector {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// RootNamespace is the mesh's root namespace ("istio-system" when unset).
func RootNamespace(pc *push.PushContext) string {
	if pc.Mesh != nil && pc.Mesh.GetRootNamespace() != "" {
		return pc.Mesh.GetRootNamespace()
	}
	return "istio-system"
}

// SidecarFor returns the Sidecar that applies to proxy (SidecarConfigFor's
// spec); nil if none.
func SidecarFor(pc *push.PushContext, proxy *model.Proxy) *networking.Sidecar {
	if c := SidecarConfigFor(pc, proxy); c != nil {
		return c.Spec.(*networking.Sidecar)
	}
	return nil
}

// SidecarConfigFor returns the Sidecar config that applies to proxy: one
// in its namespace whose workloadSelector matches its labels, else one in
// its namespace without a selector, else one in the root namespace
// without a selector; of several, the oldest, then the first by name
// (istiod's sidecar index, sorted by creation time); nil if none. The
// config is the snapshot's and must not be altered.
func SidecarConfigFor(pc *push.PushContext, proxy *model.Proxy) *config.Config {
	var nsDefault *config.Config
	for _, c := range pc.ConfigsInByAge(config.Sidecar, proxy.Namespace) {
		sc := c.Spec.(*networking.Sidecar)
		if sel := sc.GetWorkloadSelector(); sel != nil {
			if LabelsMatch(sel.GetLabels(), proxy.Labels) {
				return c
			}
		} else if nsDefault == nil {
			nsDefault = c
		}
	}
	if nsDefault != nil {
		return nsDefault
	}
	for _, c := range pc.ConfigsInByAge(config.Sidecar, RootNamespace(pc)) {
		if c.Spec.(*networking.Sidecar).GetWorkloadSelector() == nil {
			return c
		}
	}
	return nil
}
