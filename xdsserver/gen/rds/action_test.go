package rds

import (
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/baremesh/baremesh/xdsserver/gen/gentest"
	"github.com/baremesh/baremesh/xdsserver/gen/scope"
)

// TestSameAction checks that HTTP routes differing in any field action
// reads are not taken to share an action, and that those sameAction
// pairs get equal actions.
func TestSameAction(t *testing.T) {
	cfg := `
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: a, namespace: ns}
spec:
  hosts: [a.ns.svc.cluster.local]
  ports: [{number: 80, name: http, protocol: HTTP}, {number: 8080, name: http2, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.1}]
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: a, namespace: ns}
spec:
  host: a.ns.svc.cluster.local
  trafficPolicy: {loadBalancer: {consistentHash: {httpHeaderName: x}}}
  subsets: [{name: v1, labels: {v: "1"}, trafficPolicy: {loadBalancer: {consistentHash: {useSourceIp: true}}}}]
`
	v := sidecarView(t, cfg, serviceB)
	dest := func(host, subset string, port uint32, weight int32) *networking.HTTPRouteDestination {
		d := &networking.HTTPRouteDestination{Destination: &networking.Destination{Host: host, Subset: subset}, Weight: weight}
		if port != 0 {
			d.Destination.Port = &networking.PortSelector{Number: port}
		}
		return d
	}
	base := func() *networking.HTTPRoute {
		return &networking.HTTPRoute{Route: []*networking.HTTPRouteDestination{dest("a.ns.svc.cluster.local", "", 0, 0)}}
	}
	variants := map[string]func(*networking.HTTPRoute){
		"host":   func(h *networking.HTTPRoute) { h.Route[0].Destination.Host = "b.ns.svc.cluster.local" },
		"subset": func(h *networking.HTTPRoute) { h.Route[0].Destination.Subset = "v1" },
		"port":   func(h *networking.HTTPRoute) { h.Route[0].Destination.Port = &networking.PortSelector{Number: 8080} },
		"weights": func(h *networking.HTTPRoute) {
			h.Route = []*networking.HTTPRouteDestination{dest("a", "", 0, 50), dest("b", "", 0, 50)}
		},
		"weights2": func(h *networking.HTTPRoute) {
			h.Route = []*networking.HTTPRouteDestination{dest("a", "", 0, 60), dest("b", "", 0, 40)}
		},
		"timeout":  func(h *networking.HTTPRoute) { h.Timeout = durationpb.New(3e9) },
		"timeout2": func(h *networking.HTTPRoute) { h.Timeout = durationpb.New(35e8) },
		"retries":  func(h *networking.HTTPRoute) { h.Retries = &networking.HTTPRetry{Attempts: 5} },
		"retries2": func(h *networking.HTTPRoute) {
			h.Retries = &networking.HTTPRetry{Attempts: 5, PerTryTimeout: durationpb.New(1e9)}
		},
		"noretries": func(h *networking.HTTPRoute) { h.Retries = &networking.HTTPRetry{} },
		"mirror":    func(h *networking.HTTPRoute) { h.Mirror = &networking.Destination{Host: "b.ns.svc.cluster.local"} },
		"mirrorpct": func(h *networking.HTTPRoute) { h.MirrorPercentage = &networking.Percent{Value: 10} },
		"mirrors": func(h *networking.HTTPRoute) {
			h.Mirrors = []*networking.HTTPMirrorPolicy{{Destination: &networking.Destination{Host: "b"}}}
		},
		"rewrite":  func(h *networking.HTTPRoute) { h.Rewrite = &networking.HTTPRewrite{Uri: "/x"} },
		"rewrite2": func(h *networking.HTTPRoute) { h.Rewrite = &networking.HTTPRewrite{Authority: "x"} },
		"regex": func(h *networking.HTTPRoute) {
			h.Rewrite = &networking.HTTPRewrite{UriRegexRewrite: &networking.RegexRewrite{Match: "a", Rewrite: "b"}}
		},
		"nothing": func(h *networking.HTTPRoute) {},
		"headers": func(h *networking.HTTPRoute) {
			h.Headers = &networking.Headers{Request: &networking.Headers_HeaderOperations{Set: map[string]string{"a": "b"}}}
		},
		"authority": func(h *networking.HTTPRoute) {
			h.Headers = &networking.Headers{Request: &networking.Headers_HeaderOperations{Set: map[string]string{":authority": "x"}}}
		},
		"destauthority": func(h *networking.HTTPRoute) {
			h.Route[0].Headers = &networking.Headers{Request: &networking.Headers_HeaderOperations{Add: map[string]string{"Host": "x"}}}
		},
		"name":       func(h *networking.HTTPRoute) { h.Name = "n" },
		"destheader": func(h *networking.HTTPRoute) { h.Route[0].Headers = &networking.Headers{} },
		"weightheaders": func(h *networking.HTTPRoute) {
			h.Route = []*networking.HTTPRouteDestination{dest("a", "", 0, 50), dest("b", "", 0, 50)}
			h.Route[1].Headers = &networking.Headers{Response: &networking.Headers_HeaderOperations{Remove: []string{"x"}}}
		},
	}
	same := map[string]bool{"nothing": true, "headers": true, "name": true, "destheader": true}
	for _, proxyless := range []bool{false, true} {
		b := routeBuilder{v: v, port: 80, gateway: "mesh", proxyless: proxyless}
		build := func(hr *networking.HTTPRoute) *routev3.RouteAction {
			ab := &actionBlock{}
			b.action(&ab.action, &ab.cluster, "ns", hr)
			return &ab.action
		}
		routes := map[string]*networking.HTTPRoute{}
		for name, change := range variants {
			hr := base()
			change(hr)
			routes[name] = hr
			if got := sameAction(base(), hr); got != same[name] {
				t.Errorf("sameAction(base, %s) = %v", name, got)
			}
		}
		for an, a := range routes {
			for bn, b := range routes {
				if sameAction(a, b) && !proto.Equal(build(a), build(b)) {
					t.Errorf("proxyless %v: %s and %s share an action but build different ones", proxyless, an, bn)
				}
			}
		}
	}
}

// sidecarView is the view of a sidecar at 10.1.1.1 in namespace ns over
// the config files (YAML).
func sidecarView(t *testing.T, files ...string) *scope.View {
	t.Helper()
	return scope.New(gentest.MustBuild(t, files...), gentest.Node(t, "sidecar~10.1.1.1~p.ns~ns.svc.cluster.local", nil))
}
