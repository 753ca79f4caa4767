package rds

import (
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	networking "istio.io/api/networking/v1alpha3"
)

// TestHeaderOpsDropInternal checks that pseudo headers and host are
// neither set, added nor removed (Istio's isInternalHeader).
func TestHeaderOpsDropInternal(t *testing.T) {
	ops := &networking.Headers_HeaderOperations{
		Set:    map[string]string{":authority": "a", "x-b": "1", "Host": "h"},
		Add:    map[string]string{":path": "/p", "x-a": "2"},
		Remove: []string{"x-c", "host", ":method", "x-d"},
	}
	got := headerOps(ops)
	want := []string{"x-b=1/OVERWRITE_IF_EXISTS_OR_ADD", "x-a=2/APPEND_IF_EXISTS_OR_ADD"}
	if len(got) != len(want) {
		t.Fatalf("headerOps = %v, want %v", got, want)
	}
	for i, o := range got {
		if s := o.GetHeader().GetKey() + "=" + o.GetHeader().GetValue() + "/" + o.GetAppendAction().String(); s != want[i] {
			t.Errorf("headerOps[%d] = %s, want %s", i, s, want[i])
		}
	}
	if r := dropInternal(ops.Remove); len(r) != 2 || r[0] != "x-c" || r[1] != "x-d" {
		t.Errorf("dropInternal = %v", r)
	}
	if keep := []string{"x-c"}; &dropInternal(keep)[0] != &keep[0] {
		t.Error("dropInternal copied a list without internal headers")
	}
	if headerOps(&networking.Headers_HeaderOperations{Set: map[string]string{":status": "1"}}) != nil {
		t.Error("headerOps of internal headers only is not nil")
	}
}

// TestHostRewriteFromHeaders checks where a request :authority or host
// header operation ends up, as Istio puts it: the route action's host
// rewrite unless the rewrite has an authority, the route's before its
// one destination's, set before add; each weighted cluster its own.
func TestHostRewriteFromHeaders(t *testing.T) {
	v := sidecarView(t, serviceA)
	req := func(set, add map[string]string) *networking.Headers {
		return &networking.Headers{Request: &networking.Headers_HeaderOperations{Set: set, Add: add}}
	}
	dest := func(w int32, h *networking.Headers) *networking.HTTPRouteDestination {
		return &networking.HTTPRouteDestination{Destination: &networking.Destination{Host: "a"}, Weight: w, Headers: h}
	}
	for _, tc := range []struct {
		name      string
		hr        *networking.HTTPRoute
		route     string   // the action's host rewrite
		clusters  []string // the weighted clusters'
		proxyless bool
	}{
		{name: "none", hr: &networking.HTTPRoute{Route: []*networking.HTTPRouteDestination{dest(0, req(map[string]string{"x": "y"}, nil))}}},
		{name: "route set", hr: &networking.HTTPRoute{Headers: req(map[string]string{":authority": "r"}, nil), Route: []*networking.HTTPRouteDestination{dest(0, nil)}}, route: "r"},
		{name: "route host add", hr: &networking.HTTPRoute{Headers: req(nil, map[string]string{"Host": "r"}), Route: []*networking.HTTPRouteDestination{dest(0, nil)}}, route: "r"},
		{name: "set before add", hr: &networking.HTTPRoute{Headers: req(map[string]string{"host": "s"}, map[string]string{":authority": "a"}), Route: []*networking.HTTPRouteDestination{dest(0, nil)}}, route: "s"},
		{name: "destination", hr: &networking.HTTPRoute{Route: []*networking.HTTPRouteDestination{dest(0, req(map[string]string{":authority": "d"}, nil))}}, route: "d"},
		{name: "route before destination", hr: &networking.HTTPRoute{Headers: req(map[string]string{":authority": "r"}, nil), Route: []*networking.HTTPRouteDestination{dest(0, req(map[string]string{":authority": "d"}, nil))}}, route: "r"},
		{name: "rewrite first", hr: &networking.HTTPRoute{Rewrite: &networking.HTTPRewrite{Authority: "w"}, Headers: req(map[string]string{":authority": "r"}, nil), Route: []*networking.HTTPRouteDestination{dest(0, nil)}}, route: "w"},
		{name: "live destination", hr: &networking.HTTPRoute{Route: []*networking.HTTPRouteDestination{dest(0, req(map[string]string{"host": "x"}, nil)), dest(100, req(map[string]string{"host": "d"}, nil))}}, clusters: []string{"d"}}, // as istiod: weighted, weight 0 left out
		{name: "weighted", hr: &networking.HTTPRoute{Headers: req(map[string]string{"host": "r"}, nil), Route: []*networking.HTTPRouteDestination{dest(50, req(map[string]string{"host": "c1"}, nil)), dest(50, nil)}}, route: "r", clusters: []string{"c1", ""}},
		// As istiod, a proxyless client's routes too (gRPC ignores them).
		{name: "proxyless", hr: &networking.HTTPRoute{Headers: req(map[string]string{":authority": "r"}, nil), Route: []*networking.HTTPRouteDestination{dest(50, req(map[string]string{"host": "c1"}, nil)), dest(50, nil)}}, route: "r", clusters: []string{"c1", ""}, proxyless: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := routeBuilder{v: v, port: 80, gateway: "mesh", proxyless: tc.proxyless}
			ab := &actionBlock{}
			b.action(&ab.action, &ab.cluster, "ns", tc.hr)
			if got := ab.action.GetHostRewriteLiteral(); got != tc.route {
				t.Errorf("route host rewrite = %q, want %q", got, tc.route)
			}
			var got []string
			for _, cw := range ab.action.GetWeightedClusters().GetClusters() {
				got = append(got, cw.GetHostRewriteLiteral())
			}
			if len(got) != len(tc.clusters) {
				t.Fatalf("cluster host rewrites = %q, want %q", got, tc.clusters)
			}
			for i := range got {
				if got[i] != tc.clusters[i] {
					t.Errorf("cluster host rewrites = %q, want %q", got, tc.clusters)
				}
			}
			r := &routev3.Route{}
			applyHeaders(r, tc.hr.GetHeaders(), singleLive(tc.hr).GetHeaders())
			for _, o := range r.GetRequestHeadersToAdd() {
				if isInternal(o.GetHeader().GetKey()) {
					t.Errorf("route sets internal header %s", o.GetHeader().GetKey())
				}
			}
		})
	}
}
