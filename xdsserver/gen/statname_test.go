package gen

import "testing"

// TestStatName: the mesh's cluster stat name patterns expand as istiod's
// BuildStatPrefix and BuildInboundStatPrefix (a Kubernetes Service's
// %SERVICE% is "name.namespace"; the inbound form leaves %TARGET_PORT%).
func TestStatName(t *testing.T) {
	pat := "%SERVICE%|%SERVICE_NAME%|%SERVICE_FQDN%|%SUBSET_NAME%|%SERVICE_PORT%|%SERVICE_PORT_NAME%|%TARGET_PORT%"
	for _, c := range []struct{ got, want string }{
		{StatName(pat, "app.fleet.internal", "default", false, "v1", 8080, "http", 0), "app.fleet.internal|app.fleet.internal|app.fleet.internal|v1|8080|http|0"},
		{StatName(pat, "reviews.bookinfo.svc.cluster.local", "bookinfo", true, "", 9080, "http", 9081), "reviews.bookinfo|reviews|reviews.bookinfo.svc.cluster.local||9080|http|9081"},
		{InboundStatName(pat, "app.fleet.internal", "default", false, 9000, "tcp"), "app.fleet.internal|app.fleet.internal|app.fleet.internal||9000|tcp|%TARGET_PORT%"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}
