package scope

import (
	"testing"

	"google.golang.org/protobuf/types/known/wrapperspb"
	meshv1alpha1 "istio.io/api/mesh/v1alpha1"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/core/push"
)

// TestLocalityLbSetting follows istiod's GetEffectiveLbSetting: the
// DestinationRule's setting wins, enabled: false on either turns it off;
// a service's traffic distribution comes between them, as failover
// priorities that apply without outlier detection (force).
func TestLocalityLbSetting(t *testing.T) {
	failover := []*networking.LocalityLoadBalancerSetting_Failover{{From: "us", To: "eu"}}
	mesh := &networking.LocalityLoadBalancerSetting{Failover: failover}
	dr := &networking.LocalityLoadBalancerSetting{FailoverPriority: []string{"version"}}
	off := &networking.LocalityLoadBalancerSetting{Enabled: wrapperspb.Bool(false), Failover: failover}
	policy := func(l *networking.LocalityLoadBalancerSetting) *networking.TrafficPolicy {
		return &networking.TrafficPolicy{LoadBalancer: &networking.LoadBalancerSettings{LocalityLbSetting: l}}
	}
	tests := []struct {
		name   string
		mesh   *meshv1alpha1.MeshConfig
		policy *networking.TrafficPolicy
		want   *networking.LocalityLoadBalancerSetting
		td     model.TrafficDistribution
		force  bool
	}{
		{"no mesh config: Istio's default", nil, nil, meshLocalityDefault, 0, false},
		{"mesh", &meshv1alpha1.MeshConfig{LocalityLbSetting: mesh}, nil, mesh, 0, false},
		{"mesh without setting", &meshv1alpha1.MeshConfig{}, nil, nil, 0, false},
		{"mesh disabled", &meshv1alpha1.MeshConfig{LocalityLbSetting: off}, nil, nil, 0, false},
		{"destination rule wins", &meshv1alpha1.MeshConfig{LocalityLbSetting: mesh}, policy(dr), dr, 0, false},
		{"destination rule wins over a disabled mesh", &meshv1alpha1.MeshConfig{LocalityLbSetting: off}, policy(dr), dr, 0, false},
		{"destination rule disables", &meshv1alpha1.MeshConfig{LocalityLbSetting: mesh}, policy(off), nil, 0, false},
		{"load balancer without setting", &meshv1alpha1.MeshConfig{LocalityLbSetting: mesh}, policy(nil), mesh, 0, false},
		{"traffic distribution over the mesh", &meshv1alpha1.MeshConfig{LocalityLbSetting: mesh}, nil, preferSameZone, model.TrafficDistributionPreferSameZone, true},
		{"traffic distribution over a disabled mesh", &meshv1alpha1.MeshConfig{LocalityLbSetting: off}, nil, preferSameNode, model.TrafficDistributionPreferSameNode, true},
		{"destination rule over traffic distribution", nil, policy(dr), dr, model.TrafficDistributionPreferSameZone, false},
		{"destination rule disables traffic distribution", nil, policy(off), nil, model.TrafficDistributionPreferSameZone, false},
	}
	for _, tt := range tests {
		got, force := LocalityLbSetting(&push.PushContext{Mesh: tt.mesh}, tt.policy, &model.Service{TrafficDistribution: tt.td})
		if got != tt.want || force != tt.force {
			t.Errorf("%s: got %v (force %v), want %v (force %v)", tt.name, got, force, tt.want, tt.force)
		}
	}
}
