package envoyfilter

import (
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	networking "istio.io/api/networking/v1alpha3"
)

// TestClusterMatchSNIForm: a cluster match by service, subset and port
// takes an east-west gateway's "outbound_.PORT_.SUBSET_.HOST" clusters as
// it takes "outbound|PORT|SUBSET|HOST" ones (istiod's ParseSubsetKey
// reads both); before, the SNI form matched no service at all.
func TestClusterMatchSNIForm(t *testing.T) {
	p := &patch{match: &networking.EnvoyFilter_EnvoyConfigObjectMatch{ObjectTypes: &networking.EnvoyFilter_EnvoyConfigObjectMatch_Cluster{
		Cluster: &networking.EnvoyFilter_ClusterMatch{Service: "inventory.fleet.internal", Subset: "v1", PortNumber: 5432},
	}}}
	for name, want := range map[string]bool{
		"outbound|5432|v1|inventory.fleet.internal":    true,
		"outbound_.5432_.v1_.inventory.fleet.internal": true,
		"outbound_.5432_.v2_.inventory.fleet.internal": false,
		"outbound_.80_.v1_.inventory.fleet.internal":   false,
		"outbound_.5432_.v1_.other.fleet.internal":     false,
	} {
		if got := clusterMatch(&clusterv3.Cluster{Name: name}, p, nil); got != want {
			t.Errorf("%s: match %v, want %v", name, got, want)
		}
	}
}
