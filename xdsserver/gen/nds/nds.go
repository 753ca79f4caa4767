// Package nds generates Istio's DNS name table (NDS, type
// istio.networking.nds.v1.NameTable): the hosts a proxy can see and
// their addresses, from which Istio's agent (pilot-agent with
// ISTIO_META_DNS_CAPTURE=true) answers the DNS queries of the workload
// beside it, forwarding the rest to the resolvers of its resolv.conf.
//
// The table follows istiod's (istio/istio pkg/dns/server/name_table.go):
//   - every service the proxy sees (exportTo and Sidecar egress hosts,
//     xdsserver/gen/scope);
//   - with its declared addresses (a ServiceEntry's addresses, a /32 or
//     /128 CIDR as its IP, wider CIDRs left out; a Kubernetes Service's
//     cluster IPs of the proxy's IP families), or the addresses allocated
//     to it when the proxy captures DNS (DNS_CAPTURE, as istiod 1.31:
//     IPv4, IPv6, or both for a dual-stack proxy);
//   - a headless Kubernetes Service (with ports) gets its ready
//     endpoints' IPs in the proxy's network, as Kubernetes DNS answers;
//   - any other service without an address is left out (a DNS
//     ServiceEntry without addresses for a proxy that does not ask for
//     allocated ones, a wildcard host without addresses, an ExternalName
//     Service, a resolution NONE ServiceEntry without addresses): the
//     agent forwards those names upstream. istiod's builder would list a
//     NONE ServiceEntry's endpoints too, but it takes only endpoints whose
//     health status is Healthy, and it gives a ServiceEntry's endpoints
//     (inline or WorkloadEntries) none, so they never are: checked
//     against a real istiod (internal/e2e TestNameTableAgainstIstiod);
//   - a Kubernetes Service's entry carries Registry "Kubernetes", its
//     name and namespace, from which the agent also answers "name",
//     "name.namespace" and "name.namespace.svc" (the search-domain
//     forms); other entries carry Registry "External";
//   - a host seen in several namespaces is one entry: the addresses of
//     ServiceEntries are merged, and a Kubernetes Service's entry wins
//     over ServiceEntries (a ServiceEntry cannot squat on a Service's
//     name).
//
// The generator serves any proxy that asks, as istiod does; only
// Istio's agent asks (Envoy and proxyless gRPC never subscribe to it).
// Generation is pure: snapshot and proxy in, one resource out.
//
// It imports core and xdsserver/gen, never the serving packages.
package nds

import (
	"net/netip"
	"slices"
	"strings"

	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/core/push"
	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/scope"
)

// Registry names, as Istio's provider IDs.
const (
	Kubernetes = "Kubernetes"
	External   = "External"
)

// clusterSetSuffix marks Kubernetes multi-cluster service hosts, which
// get no short forms (they would clash with the cluster.local ones).
const clusterSetSuffix = ".svc.clusterset.local"

// Generate returns the proxy's name table, one resource without a name
// (istiod's form: the agent reads the first resource of a response).
func Generate(in gen.Input) ([]gen.Resource, error) {
	return []gen.Resource{{Name: "", Resource: Build(in.Push, in.Proxy).Message()}}, nil
}

// Build computes the name table of proxy p on snapshot pc.
func Build(pc *push.PushContext, p *model.Proxy) Table {
	v := scope.New(pc, p)
	fam := familiesOf(p.IPs)
	out := make(Table, len(v.Services))
	for _, s := range v.Services {
		ips := addresses(pc, s, p, fam)
		if len(ips) == 0 {
			continue
		}
		kube := s.Source.Kind == model.KindKubeService
		in := &Info{IPs: ips, Registry: External}
		if kube {
			in.Registry = Kubernetes
			if !strings.HasSuffix(s.Hostname, clusterSetSuffix) {
				in.Shortname, in.Namespace = kubeName(s), s.Namespace
			}
		}
		old := out[s.Hostname]
		switch {
		case old == nil:
			out[s.Hostname] = in
		case old.Registry == Kubernetes:
			// A Kubernetes Service's entry stands.
		case kube:
			out[s.Hostname] = in
		default:
			old.IPs = appendNew(old.IPs, ips)
		}
	}
	return out
}

// addresses are the IPs of s that proxy p resolves its host to.
func addresses(pc *push.PushContext, s *model.Service, p *model.Proxy, fam families) []string {
	var out []string
	switch {
	case s.AutoAllocated:
		if !p.DNSAutoAllocate {
			return nil
		}
		for _, a := range append(s.Addresses[:len(s.Addresses):len(s.Addresses)], s.AutoAllocatedIPv6) {
			if ip, err := netip.ParseAddr(a); err == nil && fam.has(ip) {
				out = append(out, a)
			}
		}
		return out
	case s.Source.Kind == model.KindKubeService:
		for _, a := range s.Addresses {
			if ip, err := netip.ParseAddr(a); err == nil && fam.has(ip) {
				out = append(out, a)
			}
		}
		if len(s.Addresses) > 0 {
			return out
		}
	default:
		for _, a := range s.Addresses {
			if ip, ok := hostIP(a); ok {
				out = append(out, ip)
			}
		}
		if len(s.Addresses) > 0 {
			return out
		}
	}
	if !headless(s) {
		return nil
	}
	// Headless: the endpoints' IPs, each once, healthy and in the
	// proxy's network (or either network unset). Istio leaves out other
	// networks' endpoints, as passthrough traffic does not cross a
	// network gateway.
	for _, e := range pc.Endpoints.Endpoints(s.Key()) {
		if !e.Healthy || (e.Network != "" && p.Network != "" && e.Network != p.Network) {
			continue
		}
		if _, err := netip.ParseAddr(e.Address); err != nil || len(out) > 0 && out[len(out)-1] == e.Address {
			continue // not an IP, or an address seen (endpoints are sorted by address)
		}
		out = append(out, e.Address)
	}
	return out
}

// EndpointsMatter reports whether an endpoint-only change of the
// changed services can alter a name table: only if one of them is
// headless (its endpoints' IPs are in the table) or gone from pc. It
// does not judge visibility: that would cost a scope per proxy and push.
func EndpointsMatter(pc *push.PushContext, _ *model.Proxy, changed map[model.ServiceKey]bool) bool {
	if pc == nil {
		return true
	}
	for k := range changed {
		if s := pc.Service(k.Hostname, k.Namespace); s == nil || headless(s) {
			return true
		}
	}
	return false
}

// headless reports whether s resolves to its endpoints' IPs: a
// headless Kubernetes Service with ports.
func headless(s *model.Service) bool {
	return s.Source.Kind == model.KindKubeService && s.Resolution == model.Passthrough && len(s.Addresses) == 0 && len(s.Ports) > 0
}

// hostIP reads a declared ServiceEntry address: an IP, or a CIDR that
// holds one address (as Istio turns a /32 into its IP); wider CIDRs
// resolve to nothing.
func hostIP(a string) (string, bool) {
	if _, err := netip.ParseAddr(a); err == nil {
		return a, true
	}
	if pfx, err := netip.ParsePrefix(a); err == nil && pfx.Bits() == pfx.Addr().BitLen() {
		return pfx.Addr().String(), true
	}
	return "", false
}

// kubeName is the name of the Kubernetes Service s comes from.
func kubeName(s *model.Service) string {
	if _, name, ok := strings.Cut(s.Source.Name, "/"); ok && name != "" {
		return name
	}
	name, _, _ := strings.Cut(s.Hostname, ".")
	return name
}

// families are the IP families a proxy reaches: those of its IPs (a
// proxy without IPs counts as IPv4-only, as in istiod).
type families struct{ v4, v6 bool }

func familiesOf(ips []string) families {
	var f families
	for _, s := range ips {
		if ip, err := netip.ParseAddr(s); err == nil {
			if ip.Unmap().Is4() {
				f.v4 = true
			} else {
				f.v6 = true
			}
		}
	}
	if !f.v4 && !f.v6 {
		f.v4 = true
	}
	return f
}

func (f families) has(ip netip.Addr) bool {
	if ip.Unmap().Is4() {
		return f.v4
	}
	return f.v6
}

// appendNew appends the strings of add that dst lacks.
func appendNew(dst, add []string) []string {
	for _, a := range add {
		if !slices.Contains(dst, a) {
			dst = append(dst, a)
		}
	}
	return dst
}
