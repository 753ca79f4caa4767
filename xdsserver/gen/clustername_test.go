package gen

import "testing"

// TestClusterNames: both of Istio's forms parse back to what made them;
// names of neither form do not parse.
func TestClusterNames(t *testing.T) {
	for _, c := range []struct {
		name string
		want ClusterKey
	}{
		{ClusterName(Outbound, 8080, "v1", "reviews.default.svc.cluster.local"), ClusterKey{Outbound, 8080, "v1", "reviews.default.svc.cluster.local", false}},
		{ClusterName(Inbound, 9000, "", ""), ClusterKey{Inbound, 9000, "", "", false}},
		{SNIClusterName(8080, "", "reviews.default.svc.cluster.local"), ClusterKey{Outbound, 8080, "", "reviews.default.svc.cluster.local", true}},
		{SNIClusterName(443, "v2", "api.fleet.internal"), ClusterKey{Outbound, 443, "v2", "api.fleet.internal", true}},
	} {
		got, ok := ParseClusterName(c.name)
		if !ok || got != c.want {
			t.Errorf("ParseClusterName(%q) = %+v, %v; want %+v", c.name, got, ok, c.want)
		}
	}
	if n := SNIClusterName(8080, "", "a.b"); n != "outbound_.8080_._.a.b" {
		t.Errorf("SNIClusterName = %q", n)
	}
	for _, n := range []string{"PassthroughCluster", "outbound_.x_._.h", "outbound_.80_.h", "outbound_.80_._.", "outbound|80|h"} {
		if k, ok := ParseClusterName(n); ok {
			t.Errorf("ParseClusterName(%q) = %+v, want not a cluster name", n, k)
		}
	}
}
