package scope

import (
	"google.golang.org/protobuf/types/known/wrapperspb"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/core/push"
)

// meshLocalityDefault is Istio's default mesh localityLbSetting
// (enabled, no rules), used when the snapshot has no mesh config.
var meshLocalityDefault = &networking.LocalityLoadBalancerSetting{Enabled: wrapperspb.Bool(true)}

// The settings istiod makes of a service's traffic distribution
// (loadbalancer.GetEffectiveLbSetting). Shared, never altered.
var (
	preferSameZone = &networking.LocalityLoadBalancerSetting{Enabled: wrapperspb.Bool(true),
		FailoverPriority: []string{"topology.istio.io/network", "topology.kubernetes.io/region", "topology.kubernetes.io/zone"}}
	preferSameNode = &networking.LocalityLoadBalancerSetting{Enabled: wrapperspb.Bool(true),
		FailoverPriority: []string{"topology.istio.io/network", "topology.kubernetes.io/region", "topology.kubernetes.io/zone",
			"topology.istio.io/subzone", "kubernetes.io/hostname"}}
)

// LocalityLbSetting is the locality load balancing setting that applies
// to svc's clusters with a merged traffic policy (see Policy), as
// istiod's loadbalancer.GetEffectiveLbSetting picks it: the
// DestinationRule's when it has one (nil when that one says enabled:
// false); else the service's traffic distribution, as failover
// priorities by network, region and zone (and subzone and node), with
// force set: failover then applies without outlier detection; else the
// mesh config's (nil when disabled). The result is the snapshot's and
// must not be altered. It reads only the policy, svc and pc.Mesh, which
// the snapshot version covers. (istiod's zoneAwareLbSetting, which needs
// Envoy's local cluster, is not read.)
func LocalityLbSetting(pc *push.PushContext, policy *networking.TrafficPolicy, svc *model.Service) (setting *networking.LocalityLoadBalancerSetting, force bool) {
	if dr := policy.GetLoadBalancer().GetLocalityLbSetting(); dr != nil {
		if e := dr.GetEnabled(); e != nil && !e.GetValue() {
			return nil, false
		}
		return dr, false
	}
	switch svc.TrafficDistribution {
	case model.TrafficDistributionPreferSameZone:
		return preferSameZone, true
	case model.TrafficDistributionPreferSameNode:
		return preferSameNode, true
	}
	mesh := meshLocalityDefault
	if pc.Mesh != nil {
		mesh = pc.Mesh.GetLocalityLbSetting()
	}
	if e := mesh.GetEnabled(); e != nil && !e.GetValue() {
		return nil, false
	}
	return mesh, false
}
