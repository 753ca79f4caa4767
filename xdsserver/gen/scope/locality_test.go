package scope

import (
	"testing"

	"google.golang.org/protobuf/types/known/wrapperspb"
	meshv1alpha1 "istio.io/api/mesh/v1alpha1"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/baremesh/baremesh/core/push"
)

// TestLocalityLbSetting follows istiod's GetLocalityLbSetting: the
// DestinationRule's setting wins, enabled: false on either turns it off.
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
	}{
		{"no mesh config: Istio's default", nil, nil, meshLocalityDefault},
		{"mesh", &meshv1alpha1.MeshConfig{LocalityLbSetting: mesh}, nil, mesh},
		{"mesh without setting", &meshv1alpha1.MeshConfig{}, nil, nil},
		{"mesh disabled", &meshv1alpha1.MeshConfig{LocalityLbSetting: off}, nil, nil},
		{"destination rule wins", &meshv1alpha1.MeshConfig{LocalityLbSetting: mesh}, policy(dr), dr},
		{"destination rule wins over a disabled mesh", &meshv1alpha1.MeshConfig{LocalityLbSetting: off}, policy(dr), dr},
		{"destination rule disables", &meshv1alpha1.MeshConfig{LocalityLbSetting: mesh}, policy(off), nil},
		{"load balancer without setting", &meshv1alpha1.MeshConfig{LocalityLbSetting: mesh}, policy(nil), mesh},
	}
	for _, tt := range tests {
		if got := LocalityLbSetting(&push.PushContext{Mesh: tt.mesh}, tt.policy); got != tt.want {
			t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
		}
	}
}
