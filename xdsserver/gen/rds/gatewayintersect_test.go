package rds

import (
	"slices"
	"testing"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/baremesh/baremesh/xdsserver/gen/scope"
)

// TestIntersectHosts (issue #28): a VirtualService host meets a server
// host as in istiod's host intersection: the more specific of the two,
// in server-host order, once. A "*" VirtualService (a Gateway API route
// without hostnames) on a server of "first.example.com" is served as
// first.example.com, not as a "*" virtual host of its own (it took every
// other listener's requests on that port).
func TestIntersectHosts(t *testing.T) {
	for _, tc := range []struct {
		name        string
		serverHosts []string
		vsNS        string
		vsHosts     []string
		want        []string
	}{
		{"vs wildcard on specific server", []string{"*/first.example.com"}, "default", []string{"*"}, []string{"first.example.com"}},
		{"specific vs on wildcard server", []string{"*/*"}, "default", []string{"a.example.com", "b.example.com"}, []string{"a.example.com", "b.example.com"}},
		{"suffix wildcards", []string{"*/*.example.com"}, "default", []string{"*", "x.example.com"}, []string{"*.example.com", "x.example.com"}},
		{"once", []string{"*/a.example.com"}, "default", []string{"*", "a.example.com"}, []string{"a.example.com"}},
		{"server host order", []string{"*/b.example.com", "*/a.example.com"}, "default", []string{"*"}, []string{"b.example.com", "a.example.com"}},
		{"other namespace", []string{"gw/*"}, "default", []string{"a.example.com"}, nil},
		{"dot namespace", []string{"./*"}, "gw", []string{"a.example.com"}, []string{"a.example.com"}},
		{"no match", []string{"*/a.example.com"}, "default", []string{"b.example.com"}, nil},
	} {
		s := scope.GatewayServer{Gateway: "gw/g", Namespace: "gw", Server: &networking.Server{Hosts: tc.serverHosts}}
		if got := intersectHosts(s, tc.vsNS, tc.vsHosts); !slices.Equal(got, tc.want) {
			t.Errorf("%s: intersectHosts(%v, %s, %v) = %v, want %v", tc.name, tc.serverHosts, tc.vsNS, tc.vsHosts, got, tc.want)
		}
	}
}
