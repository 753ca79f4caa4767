package rds

import (
	"testing"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/baremesh/baremesh/core/config"
)

// TestRoutesStopAtCatchAll: as istiod, the routes of a VirtualService
// end at the first that matches every request (no match, prefix "/" or
// regex ".*" without other conditions); routes after it are unreachable.
func TestRoutesStopAtCatchAll(t *testing.T) {
	v := sidecarView(t, serviceA)
	dest := []*networking.HTTPRouteDestination{{Destination: &networking.Destination{Host: "a"}}}
	prefix := func(p string) *networking.HTTPMatchRequest {
		return &networking.HTTPMatchRequest{Uri: &networking.StringMatch{MatchType: &networking.StringMatch_Prefix{Prefix: p}}}
	}
	withHeader := prefix("/")
	withHeader.Headers = map[string]*networking.StringMatch{"x": {MatchType: &networking.StringMatch_Exact{Exact: "1"}}}
	for _, tc := range []struct {
		name string
		http []*networking.HTTPRoute
		want int
	}{
		{"no match", []*networking.HTTPRoute{{Route: dest}, {Match: []*networking.HTTPMatchRequest{prefix("/a")}, Route: dest}}, 1},
		{"prefix /", []*networking.HTTPRoute{{Match: []*networking.HTTPMatchRequest{prefix("/b"), prefix("/"), prefix("/c")}, Route: dest}, {Route: dest}}, 2},
		{"header", []*networking.HTTPRoute{{Match: []*networking.HTTPMatchRequest{withHeader}, Route: dest}, {Route: dest}}, 2},
	} {
		c := &config.Config{Meta: config.Meta{Name: "vs", Namespace: "ns"}, Spec: &networking.VirtualService{Hosts: []string{"a"}, Http: tc.http}}
		b := routeBuilder{v: v, port: 80, gateway: "mesh"}
		if got := len(b.vsRoutes(c, nil)); got != tc.want {
			t.Errorf("%s: %d routes, want %d", tc.name, got, tc.want)
		}
	}
}
