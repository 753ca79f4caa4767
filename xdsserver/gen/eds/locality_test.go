package eds

import (
	"fmt"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/xdsserver/gen"
)

// TestApplyLocalityLB checks the weights and priorities against the
// rules of istiod's loadbalancer package. Endpoints are
// "locality:weight:version"; the result lists each locality as
// "locality w=WEIGHT p=PRIORITY n=ENDPOINTS".
func TestApplyLocalityLB(t *testing.T) {
	eps := []string{"us/a/1:1:v1", "us/a/1:1:v2", "us/a/2:3:v1", "us/b:1:v1", "eu/c:1:v2", "ap/d:1:v1"}
	proxy := &corev3.Locality{Region: "us", Zone: "a", SubZone: "1"}
	labels := map[string]string{"version": "v1"}
	tests := []struct {
		name     string
		eps      []string
		proxy    *corev3.Locality
		lb       *networking.LocalityLoadBalancerSetting
		failover bool
		want     string
	}{
		{
			name: "no setting: unchanged", lb: nil, failover: true,
			want: "us/a/1 w=2 p=0 n=2; us/a/2 w=3 p=0 n=1; us/b w=1 p=0 n=1; eu/c w=1 p=0 n=1; ap/d w=1 p=0 n=1",
		},
		{
			name: "proximity only with outlier detection", lb: &networking.LocalityLoadBalancerSetting{}, failover: false,
			want: "us/a/1 w=2 p=0 n=2; us/a/2 w=3 p=0 n=1; us/b w=1 p=0 n=1; eu/c w=1 p=0 n=1; ap/d w=1 p=0 n=1",
		},
		{
			name: "proximity", lb: &networking.LocalityLoadBalancerSetting{}, failover: true,
			want: "us/a/1 w=2 p=0 n=2; us/a/2 w=3 p=1 n=1; us/b w=1 p=2 n=1; eu/c w=1 p=3 n=1; ap/d w=1 p=3 n=1",
		},
		{
			name: "proximity from an unknown locality", proxy: &corev3.Locality{}, lb: &networking.LocalityLoadBalancerSetting{}, failover: true,
			eps:  []string{"us/a/1:1:v1", ":2:v1"},
			want: "us/a/1 w=1 p=1 n=1;  w=2 p=0 n=1",
		},
		{
			name: "failover region before the others",
			lb:   &networking.LocalityLoadBalancerSetting{Failover: []*networking.LocalityLoadBalancerSetting_Failover{{From: "us", To: "eu"}}}, failover: true,
			want: "us/a/1 w=2 p=0 n=2; us/a/2 w=3 p=1 n=1; us/b w=1 p=2 n=1; eu/c w=1 p=3 n=1; ap/d w=1 p=4 n=1",
		},
		{
			name: "failover rule of another region ignored",
			lb:   &networking.LocalityLoadBalancerSetting{Failover: []*networking.LocalityLoadBalancerSetting_Failover{{From: "eu", To: "ap"}}}, failover: true,
			want: "us/a/1 w=2 p=0 n=2; us/a/2 w=3 p=1 n=1; us/b w=1 p=2 n=1; eu/c w=1 p=3 n=1; ap/d w=1 p=3 n=1",
		},
		{
			name: "failoverPriority splits localities",
			lb:   &networking.LocalityLoadBalancerSetting{FailoverPriority: []string{"version", labelRegion}}, failover: true,
			want: "us/a/1 w=1 p=0 n=1; us/a/1 w=1 p=2 n=1; us/a/2 w=3 p=0 n=1; us/b w=1 p=0 n=1; eu/c w=1 p=2 n=1; ap/d w=1 p=1 n=1",
		},
		{
			name: "failoverPriority with a value override",
			lb:   &networking.LocalityLoadBalancerSetting{FailoverPriority: []string{"version=v2"}}, failover: true,
			// A split locality lists its parts by priority.
			want: "us/a/1 w=1 p=0 n=1; us/a/1 w=1 p=1 n=1; us/a/2 w=3 p=1 n=1; us/b w=1 p=1 n=1; eu/c w=1 p=0 n=1; ap/d w=1 p=1 n=1",
		},
		{
			name: "failoverPriority then failover",
			lb: &networking.LocalityLoadBalancerSetting{FailoverPriority: []string{"version"},
				Failover: []*networking.LocalityLoadBalancerSetting_Failover{{From: "us", To: "eu"}}}, failover: true,
			// version match: us/a/1 0, us/a/2 1, us/b 2, ap/d 4 (not the failover region); mismatch: us/a/1 5, eu/c 8.
			want: "us/a/1 w=1 p=0 n=1; us/a/1 w=1 p=4 n=1; us/a/2 w=3 p=1 n=1; us/b w=1 p=2 n=1; eu/c w=1 p=5 n=1; ap/d w=1 p=3 n=1",
		},
		{
			name: "failoverPriority without outlier detection",
			lb:   &networking.LocalityLoadBalancerSetting{FailoverPriority: []string{"version"}}, failover: false,
			want: "us/a/1 w=2 p=0 n=2; us/a/2 w=3 p=0 n=1; us/b w=1 p=0 n=1; eu/c w=1 p=0 n=1; ap/d w=1 p=0 n=1",
		},
		{
			name: "distribute spreads weights and empties the rest",
			lb: &networking.LocalityLoadBalancerSetting{Distribute: []*networking.LocalityLoadBalancerSetting_Distribute{
				{From: "eu/*", To: map[string]uint32{"eu/c": 100}},
				{From: "us/a/*", To: map[string]uint32{"us/a/*": 80, "us/b/*": 20}},
			}},
			want: "us/a/1 w=32 p=0 n=2; us/a/2 w=48 p=0 n=1; us/b w=20 p=0 n=1; eu/c w=1 p=0 n=0; ap/d w=1 p=0 n=0",
		},
		{
			name: "distribute rounds up; first sorted pattern takes a locality",
			lb: &networking.LocalityLoadBalancerSetting{Distribute: []*networking.LocalityLoadBalancerSetting_Distribute{
				{From: "us", To: map[string]uint32{"us/*": 50, "us/a/2": 10, "eu/*": 40}},
			}},
			// "us/*" (sorted first) takes us/a/2 before "us/a/2" can:
			// 50 over weights 2, 3, 1 is 16.7, 25, 8.3.
			want: "us/a/1 w=17 p=0 n=2; us/a/2 w=25 p=0 n=1; us/b w=9 p=0 n=1; eu/c w=40 p=0 n=1; ap/d w=1 p=0 n=0",
		},
		{
			name: "distribute from no matching locality: unchanged", proxy: &corev3.Locality{Region: "sa"},
			lb: &networking.LocalityLoadBalancerSetting{Distribute: []*networking.LocalityLoadBalancerSetting_Distribute{
				{From: "us/*", To: map[string]uint32{"us/*": 100}},
			}},
			want: "us/a/1 w=2 p=0 n=2; us/a/2 w=3 p=0 n=1; us/b w=1 p=0 n=1; eu/c w=1 p=0 n=1; ap/d w=1 p=0 n=1",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.eps
			if in == nil {
				in = eps
			}
			loc := tt.proxy
			if loc == nil {
				loc = proxy
			}
			cla, groups := buildCLA(in)
			applyLocalityLB(cla, groups, loc, withTopology(labels, loc), tt.lb, tt.failover)
			if got := describe(cla); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestLocalityMatch(t *testing.T) {
	l := &corev3.Locality{Region: "us", Zone: "a", SubZone: "1"}
	for rule, want := range map[string]bool{
		"us": true, "us/*": true, "us/a": true, "us/a/*": true, "us/a/1": true, "*": true, "*/a/1": true,
		"eu": false, "us/b": false, "us/a/2": false, "us/*/2": false, "": false,
	} {
		if got := localityMatch(l, rule); got != want {
			t.Errorf("localityMatch(us/a/1, %q) = %v, want %v", rule, got, want)
		}
	}
}

// buildCLA groups "locality:weight:version" endpoints as LoadAssignment does.
func buildCLA(eps []string) (*endpointv3.ClusterLoadAssignment, []group) {
	cla := &endpointv3.ClusterLoadAssignment{}
	var groups []group
	index := map[string]int{}
	for n, s := range eps {
		parts := strings.Split(s, ":")
		var w uint32
		fmt.Sscan(parts[1], &w)
		ep := &model.Endpoint{Address: fmt.Sprintf("10.0.0.%d", n+1), Port: 80, Locality: parts[0], Weight: w, Healthy: true,
			Labels: map[string]string{"version": parts[2]}}
		i, ok := index[ep.Locality]
		if !ok {
			i = len(groups)
			index[ep.Locality] = i
			llb := &endpointv3.LocalityLbEndpoints{Locality: ParseLocality(ep.Locality), LoadBalancingWeight: gen.U32(0)}
			groups = append(groups, group{loc: llb.Locality, llb: llb})
			cla.Endpoints = append(cla.Endpoints, llb)
		}
		groups[i].eps = append(groups[i].eps, ep)
		groups[i].llb.LbEndpoints = append(groups[i].llb.LbEndpoints, lbEndpoint(ep, ""))
		groups[i].llb.LoadBalancingWeight.Value += w
	}
	return cla, groups
}

func describe(cla *endpointv3.ClusterLoadAssignment) string {
	var out []string
	for _, l := range cla.Endpoints {
		loc := strings.TrimRight(l.GetLocality().GetRegion()+"/"+l.GetLocality().GetZone()+"/"+l.GetLocality().GetSubZone(), "/")
		out = append(out, fmt.Sprintf("%s w=%d p=%d n=%d", loc, l.GetLoadBalancingWeight().GetValue(), l.GetPriority(), len(l.GetLbEndpoints())))
	}
	return strings.Join(out, "; ")
}
