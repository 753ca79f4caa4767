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

	networking "istio.io/api/networking/v1alpha3"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/core/push"
	"github.com/baremesh/baremesh/xdsserver/gen"
)

// View is what one proxy sees of a snapshot. It is computed once per
// generation and not altered afterwards.
type View struct {
	Push  *push.PushContext
	Proxy *gen.Proxy
	// Services are the visible services, in the snapshot's order (empty
	// in a view from NewRouter).
	Services []*model.Service
	// VirtualServices are the visible VirtualServices bound to "mesh"
	// (sidecars only; routers look theirs up per Gateway).
	VirtualServices []config.Config
	sidecar         *networking.Sidecar
	// vsExact maps a VirtualService host to the first VirtualService
	// naming it; vsWild lists the wildcard hosts in order.
	vsExact map[string]int
	vsWild  []wildHost
}

// New computes the view of proxy on pc.
func New(pc *push.PushContext, proxy *gen.Proxy) *View {
	v := &View{Push: pc, Proxy: proxy}
	if proxy.Type == gen.SidecarProxy {
		v.sidecar = SidecarFor(pc, proxy)
	}
	all := pc.Services()
	v.Services = make([]*model.Service, 0, len(all))
	for _, s := range all {
		if v.ServiceVisible(s) {
			v.Services = append(v.Services, s)
		}
	}
	if proxy.Type == gen.SidecarProxy {
		v.VirtualServices = v.visibleVS(pc.VirtualServicesFor("mesh"))
		v.indexVirtualServices()
	}
	return v
}

// NewRouter is the view of a router for its listeners and routes, which
// look services up by host and never list them: Services is left empty,
// sparing a filter over every service of the mesh per generation.
func NewRouter(pc *push.PushContext, proxy *gen.Proxy) *View {
	return &View{Push: pc, Proxy: proxy}
}

// ServiceVisible reports whether the proxy may see s: exported to its
// namespace and, for a sidecar with a Sidecar resource, named by an
// egress host.
func (v *View) ServiceVisible(s *model.Service) bool {
	if !Exported(s.ExportTo, s.Namespace, v.Proxy.Namespace) {
		return false
	}
	if v.sidecar == nil {
		return true
	}
	return v.egressAllows(s.Namespace, s.Hostname)
}

func (v *View) egressAllows(ns, host string) bool {
	for _, eg := range v.sidecar.GetEgress() {
		for _, h := range eg.GetHosts() {
			hns, hh, ok := strings.Cut(h, "/")
			if !ok {
				continue
			}
			switch hns {
			case "~":
				continue
			case ".":
				hns = v.Proxy.Namespace
			}
			if (hns == "*" || hns == ns) && HostMatch(hh, host) {
				return true
			}
		}
	}
	return false
}

func (v *View) visibleVS(vss []config.Config) []config.Config {
	out := make([]config.Config, 0, len(vss))
	for _, c := range vss {
		vs := c.Spec.(*networking.VirtualService)
		if !Exported(vs.GetExportTo(), c.Namespace, v.Proxy.Namespace) {
			continue
		}
		if v.sidecar != nil && !slices.ContainsFunc(vs.GetHosts(), func(h string) bool { return v.egressAllows(c.Namespace, h) || v.egressAllowsPattern(c.Namespace, h) }) {
			continue
		}
		out = append(out, c)
	}
	return out
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
// relative to the VS's namespace), or nil. It reads the index New built.
func (v *View) VirtualServiceFor(host string) *config.Config {
	if i, ok := v.vsExact[host]; ok {
		return &v.VirtualServices[i]
	}
	for _, w := range v.vsWild {
		if HostMatch(w.pattern, host) {
			return &v.VirtualServices[w.vs]
		}
	}
	return nil
}

// indexVirtualServices builds the index VirtualServiceFor reads: every
// service of a sidecar looks its VirtualService up, and scanning every
// host of every VirtualService each time grew as services × hosts.
func (v *View) indexVirtualServices() {
	v.vsExact = make(map[string]int, len(v.VirtualServices))
	for i := range v.VirtualServices {
		c := &v.VirtualServices[i]
		for _, h := range c.Spec.(*networking.VirtualService).GetHosts() {
			h = v.FQDN(h, c.Namespace)
			if _, dup := v.vsExact[h]; !dup {
				v.vsExact[h] = i
			}
			if strings.HasPrefix(h, "*") {
				v.vsWild = append(v.vsWild, wildHost{pattern: h, vs: i})
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

// SidecarFor returns the Sidecar that applies to proxy: one in its
// namespace whose workloadSelector matches its labels, else one in its
// namespace without a selector, else one in the root namespace without a
// selector; nil if none.
func SidecarFor(pc *push.PushContext, proxy *gen.Proxy) *networking.Sidecar {
	var nsDefault *networking.Sidecar
	for _, c := range pc.ConfigsIn(config.Sidecar, proxy.Namespace) {
		sc := c.Spec.(*networking.Sidecar)
		if sel := sc.GetWorkloadSelector(); sel != nil {
			if LabelsMatch(sel.GetLabels(), proxy.Labels) {
				return sc
			}
		} else if nsDefault == nil {
			nsDefault = sc
		}
	}
	if nsDefault != nil {
		return nsDefault
	}
	for _, c := range pc.ConfigsIn(config.Sidecar, RootNamespace(pc)) {
		if sc := c.Spec.(*networking.Sidecar); sc.GetWorkloadSelector() == nil {
			return sc
		}
	}
	return nil
}
