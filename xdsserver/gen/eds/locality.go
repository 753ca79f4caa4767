package eds

import (
	"maps"
	"math"
	"slices"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/proto"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/xdsserver/gen"
)

// The topology labels istiod adds to proxy and endpoint labels from their
// locality (labelutil.AugmentLabels), which failoverPriority may name.
const (
	labelRegion  = "topology.kubernetes.io/region"
	labelZone    = "topology.kubernetes.io/zone"
	labelSubzone = "topology.istio.io/subzone"
)

// group is one LocalityLbEndpoints and the endpoints it was built from,
// in the order of its LbEndpoints (istiod's WrappedLocalityLbEndpoints):
// failoverPriority matches their labels.
type group struct {
	loc *corev3.Locality
	llb *endpointv3.LocalityLbEndpoints
	eps []*model.Endpoint
}

// applyLocalityLB follows istiod's loadbalancer.ApplyLocalityLoadBalancer:
// distribute sets locality weights for a proxy its "from" matches;
// otherwise, with failover enabled (the policy has outlier detection),
// failoverPriority splits localities by label and failover (or, without
// failoverPriority, plain proximity) sets priorities. groups is nil for
// DNS clusters, as istiod's CDS passes none: failoverPriority then does
// nothing.
func applyLocalityLB(cla *endpointv3.ClusterLoadAssignment, groups []group, locality *corev3.Locality,
	proxyLabels map[string]string, lb *networking.LocalityLoadBalancerSetting, enableFailover bool,
) {
	if lb == nil || cla == nil {
		return
	}
	switch {
	case lb.GetDistribute() != nil:
		applyLocalityWeights(cla, locality, lb.GetDistribute())
	case !enableFailover:
	case len(lb.GetFailoverPriority()) > 0:
		applyFailoverPriorities(cla, groups, proxyLabels, lb.GetFailoverPriority())
		if len(lb.GetFailover()) > 0 {
			applyLocalityFailover(cla, locality, lb.GetFailover())
		}
	default:
		applyLocalityFailover(cla, locality, lb.GetFailover())
	}
}

// applyLocalityWeights applies the first distribute rule whose "from"
// matches the proxy's locality: each "to" pattern's weight is spread over
// the localities it matches in proportion to their own weights (rounded
// up), and a locality matched by no "to" pattern keeps its entry but
// loses its endpoints, as in istiod. A locality is taken by the first
// pattern that matches it; istiod walks the "to" map in Go's random
// order, baremesh in sorted order so the output is stable.
func applyLocalityWeights(cla *endpointv3.ClusterLoadAssignment, locality *corev3.Locality, distribute []*networking.LocalityLoadBalancerSetting_Distribute) {
	for _, d := range distribute {
		if d == nil || !localityMatch(locality, d.GetFrom()) {
			continue
		}
		taken := make([]bool, len(cla.Endpoints))
		for _, to := range slices.Sorted(maps.Keys(d.GetTo())) {
			weight := d.GetTo()[to]
			var idx []int
			var orig []uint32
			var total uint64
			for i, l := range cla.Endpoints {
				if taken[i] || !localityMatch(l.GetLocality(), to) {
					continue
				}
				taken[i] = true
				w := uint32(1)
				if l.GetLoadBalancingWeight() != nil {
					w = l.GetLoadBalancingWeight().GetValue()
				}
				idx, orig = append(idx, i), append(orig, w)
				total += uint64(w)
			}
			for j, i := range idx {
				// uint64: istiod multiplies in uint32, which can overflow.
				if dw := float64(uint64(orig[j])*uint64(weight)) / float64(total); dw > 0 {
					cla.Endpoints[i].LoadBalancingWeight = gen.U32(uint32(math.Ceil(dw)))
				}
			}
		}
		for i, ok := range taken {
			if !ok {
				cla.Endpoints[i].LbEndpoints = nil
			}
		}
		return
	}
}

// applyLocalityFailover sets priorities by proximity to the proxy (0 same
// subzone, 1 same zone, 2 same region, 3 elsewhere); when a failover rule
// names the proxy's region, other regions than its "to" drop to 4.
// Priorities already set (by failoverPriority) stay the major order. The
// result is renumbered 0..n-1 without gaps, as Envoy requires.
func applyLocalityFailover(cla *endpointv3.ClusterLoadAssignment, locality *corev3.Locality, failover []*networking.LocalityLoadBalancerSetting_Failover) {
	for _, l := range cla.Endpoints {
		p := lbPriority(locality, l.GetLocality())
		if p == 3 {
			for _, f := range failover {
				if f.GetFrom() == locality.GetRegion() {
					if l.GetLocality() == nil || l.GetLocality().GetRegion() != f.GetTo() {
						p = 4
					}
					break
				}
			}
		}
		l.Priority = l.Priority*5 + p
	}
	compactPriorities(cla.Endpoints)
}

// applyFailoverPriorities splits every locality by how many of the
// failoverPriority labels, in order, its endpoints share with the proxy
// ("label=value" compares with value instead of the proxy's label): all
// of them is priority 0, none of them the lowest. Istio skips this for a
// proxy without labels.
func applyFailoverPriorities(cla *endpointv3.ClusterLoadAssignment, groups []group, proxyLabels map[string]string, priorities []string) {
	if len(proxyLabels) == 0 || len(groups) == 0 {
		return
	}
	names, values := priorityLabels(priorities)
	var out []*endpointv3.LocalityLbEndpoints
	for _, g := range groups {
		out = append(out, splitByPriority(g, proxyLabels, names, values)...)
	}
	compactPriorities(out)
	cla.Endpoints = out
}

// priorityLabels splits "label" and "label=value" entries.
func priorityLabels(priorities []string) ([]string, map[string]string) {
	names := make([]string, 0, len(priorities))
	values := map[string]string{}
	for _, p := range priorities {
		parts := strings.Split(p, "=")
		names = append(names, parts[0])
		if len(parts) == 2 {
			values[parts[0]] = parts[1]
		}
	}
	return names, values
}

func splitByPriority(g group, proxyLabels map[string]string, names []string, values map[string]string) []*endpointv3.LocalityLbEndpoints {
	lowest := len(names)
	byPriority := map[int][]int{}
	for i, ep := range g.eps {
		labels := withTopology(ep.Labels, g.loc)
		p := 0
		for j, name := range names {
			want, ok := values[name]
			if !ok {
				want = proxyLabels[name]
			}
			if want != labels[name] {
				p = lowest - j
				break
			}
		}
		byPriority[p] = append(byPriority[p], i)
	}
	out := make([]*endpointv3.LocalityLbEndpoints, 0, len(byPriority))
	for _, p := range slices.Sorted(maps.Keys(byPriority)) {
		l := proto.Clone(g.llb).(*endpointv3.LocalityLbEndpoints)
		l.LbEndpoints, l.Priority = nil, uint32(p)
		var w uint32
		for _, i := range byPriority[p] {
			l.LbEndpoints = append(l.LbEndpoints, g.llb.LbEndpoints[i])
			w += g.llb.LbEndpoints[i].GetLoadBalancingWeight().GetValue()
		}
		l.LoadBalancingWeight = gen.U32(w)
		out = append(out, l)
	}
	return out
}

// withTopology adds the locality's topology labels, as istiod's
// AugmentLabels does to proxy and endpoint labels; labels is not altered.
// The network and cluster labels istiod also adds are not: the EDS cache
// key holds neither the proxy's network nor its cluster.
func withTopology(labels map[string]string, loc *corev3.Locality) map[string]string {
	if loc.GetRegion() == "" && loc.GetZone() == "" && loc.GetSubZone() == "" {
		return labels
	}
	out := make(map[string]string, len(labels)+3)
	maps.Copy(out, labels)
	for k, v := range map[string]string{labelRegion: loc.GetRegion(), labelZone: loc.GetZone(), labelSubzone: loc.GetSubZone()} {
		if v != "" {
			out[k] = v
		}
	}
	return out
}

// localityMatch reports whether l matches a rule locality: "region",
// "region/zone", "region/zone/subzone", each part possibly "*"; a
// missing zone or subzone matches any.
func localityMatch(l *corev3.Locality, rule string) bool {
	r := ParseLocality(rule)
	return (r.GetRegion() == "*" || l.GetRegion() == r.GetRegion()) &&
		(r.GetZone() == "*" || r.GetZone() == "" || l.GetZone() == r.GetZone()) &&
		(r.GetSubZone() == "*" || r.GetSubZone() == "" || l.GetSubZone() == r.GetSubZone())
}

// lbPriority is istiod's util.LbPriority: 0 same region, zone and
// subzone; 1 same zone; 2 same region; 3 elsewhere.
func lbPriority(proxy, ep *corev3.Locality) uint32 {
	switch {
	case proxy.GetRegion() != ep.GetRegion():
		return 3
	case proxy.GetZone() != ep.GetZone():
		return 2
	case proxy.GetSubZone() != ep.GetSubZone():
		return 1
	}
	return 0
}

// compactPriorities renumbers priorities 0..n-1 in their order, without
// gaps, which Envoy requires.
func compactPriorities(locs []*endpointv3.LocalityLbEndpoints) {
	used := map[uint32]uint32{}
	for _, l := range locs {
		used[l.Priority] = 0
	}
	for i, p := range slices.Sorted(maps.Keys(used)) {
		used[p] = uint32(i)
	}
	for _, l := range locs {
		l.Priority = used[l.Priority]
	}
}
