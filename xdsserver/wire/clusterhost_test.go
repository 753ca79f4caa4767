package wire

import "testing"

// TestClusterHost: the host of both of Istio's cluster name forms (an
// endpoint push narrows EDS and keys its cache by it).
func TestClusterHost(t *testing.T) {
	for name, want := range map[string]string{
		"outbound|8080|v1|reviews.default.svc.cluster.local":  "reviews.default.svc.cluster.local",
		"outbound_.8080_._.reviews.default.svc.cluster.local": "reviews.default.svc.cluster.local",
		"outbound_.8080_.v1_.api.fleet.internal":              "api.fleet.internal",
		"inbound|9000||":                                      "",
		"PassthroughCluster":                                  "",
		"outbound_.8080":                                      "",
	} {
		if got := ClusterHost(name); got != want {
			t.Errorf("ClusterHost(%q) = %q, want %q", name, got, want)
		}
	}
}
