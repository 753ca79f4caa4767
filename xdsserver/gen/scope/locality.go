package scope

import (
	"google.golang.org/protobuf/types/known/wrapperspb"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/baremesh/baremesh/core/push"
)

// meshLocalityDefault is Istio's default mesh localityLbSetting
// (enabled, no rules), used when the snapshot has no mesh config.
var meshLocalityDefault = &networking.LocalityLoadBalancerSetting{Enabled: wrapperspb.Bool(true)}

// LocalityLbSetting is the locality load balancing setting that applies
// to a merged traffic policy (see Policy), as istiod's
// loadbalancer.GetLocalityLbSetting picks it: the DestinationRule's when
// it has one (nil when that one says enabled: false), else the mesh
// config's (nil when disabled). The result is the snapshot's and must not
// be altered. It reads only the policy and pc.Mesh, which the snapshot
// version covers.
func LocalityLbSetting(pc *push.PushContext, policy *networking.TrafficPolicy) *networking.LocalityLoadBalancerSetting {
	if dr := policy.GetLoadBalancer().GetLocalityLbSetting(); dr != nil {
		if e := dr.GetEnabled(); e != nil && !e.GetValue() {
			return nil
		}
		return dr
	}
	mesh := meshLocalityDefault
	if pc.Mesh != nil {
		mesh = pc.Mesh.GetLocalityLbSetting()
	}
	if e := mesh.GetEnabled(); e != nil && !e.GetValue() {
		return nil
	}
	return mesh
}
