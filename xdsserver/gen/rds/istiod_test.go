package rds

import (
	"slices"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/gentest"
)

// TestIstiodRouteDefaults checks what istiod writes around a sidecar's
// and a gateway's routes, as the parity run against istiod shows it
// (issue #25: virtual-host-domains, hcm-and-route-defaults): route
// configs ignore the port in host matching and allow 1 MiB direct
// responses; virtual hosts list names without ":port" forms, plus the
// absolute "host." form, and count request attempts; routes bound
// grpc-timeout by their timeout; an auto-detected port's own config
// takes every domain; a gateway's host is its only domain.
func TestIstiodRouteDefaults(t *testing.T) {
	pc := gentest.MustBuild(t, `
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: web, namespace: default}
spec:
  hosts: [web.default.svc.cluster.local]
  addresses: [10.96.0.10]
  ports: [{number: 80, name: http, protocol: HTTP}, {number: 8080, name: http-alt, protocol: HTTP}, {number: 9000, name: auto}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.1}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: web, namespace: default}
spec:
  hosts: [web.default.svc.cluster.local]
  gateways: [mesh, default/gw]
  http:
  - timeout: 3s
    route: [{destination: {host: web.default.svc.cluster.local, port: {number: 80}}}]
    mirror: {host: web.default.svc.cluster.local, port: {number: 8080}}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: ext, namespace: default}
spec:
  hosts: [api.external.example]
  http:
  - route: [{destination: {host: web.default.svc.cluster.local, port: {number: 80}}}]
---
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: gw, namespace: default}
spec:
  selector: {istio: ingressgateway}
  servers: [{port: {number: 8080, name: http, protocol: HTTP}, hosts: ["*/web.default.svc.cluster.local"]}]
`)
	sidecar := gentest.Node(t, "sidecar~10.0.0.9~client.default~default.svc.cluster.local", nil)
	res := gentest.Run(t, Generate, gen.Input{Push: pc, Proxy: sidecar, Names: []string{"80", "web.default.svc.cluster.local:9000", "8080"}})
	// A VirtualService naming no service gets a virtual host on port 80
	// only, as istiod's selectVirtualServices.
	for _, r := range res {
		has := false
		for _, vh := range r.Resource.(*routev3.RouteConfiguration).GetVirtualHosts() {
			has = has || slices.Contains(vh.GetDomains(), "api.external.example")
		}
		if want := r.Name == "80"; has != want {
			t.Errorf("%s: virtual host for api.external.example %v, want %v", r.Name, has, want)
		}
	}
	res = res[:2]
	gw := gentest.ProxySpec{ID: "router~10.0.0.8~gw.default~default.svc.cluster.local", Labels: map[string]string{"istio": "ingressgateway"}}.Proxy(t)
	res = append(res, gentest.Run(t, Generate, gen.Input{Push: pc, Proxy: gw, Names: []string{"http.8080"}})...)
	if len(res) != 3 {
		t.Fatalf("%d route configs, want 3", len(res))
	}
	want := map[string][]string{ // route config -> domains of web's virtual host
		"80":                                 {"web.default.svc.cluster.local", "web.default.svc.cluster.local.", "web.default.svc", "web.default", "web", "10.96.0.10"},
		"web.default.svc.cluster.local:9000": {"*"},
		"http.8080":                          {"web.default.svc.cluster.local"},
	}
	for _, r := range res {
		rc := r.Resource.(*routev3.RouteConfiguration)
		if !rc.GetIgnorePortInHostMatching() || rc.GetMaxDirectResponseBodySizeBytes().GetValue() != 1<<20 {
			t.Errorf("%s: ignore_port_in_host_matching %v, max_direct_response_body_size_bytes %v; want true, 1048576",
				r.Name, rc.GetIgnorePortInHostMatching(), rc.GetMaxDirectResponseBodySizeBytes())
		}
		var web *routev3.VirtualHost
		for _, vh := range rc.GetVirtualHosts() {
			if !vh.GetIncludeRequestAttemptCount() {
				t.Errorf("%s/%s: include_request_attempt_count false", r.Name, vh.GetName())
			}
			if slices.Contains([]string{"web.default.svc.cluster.local:80", "web.default.svc.cluster.local:9000", "web.default.svc.cluster.local:8080"}, vh.GetName()) {
				web = vh
			}
		}
		if web == nil {
			t.Errorf("%s: no virtual host for web", r.Name)
			continue
		}
		got := slices.Sorted(slices.Values(web.GetDomains()))
		if w := slices.Sorted(slices.Values(want[r.Name])); !slices.Equal(got, w) {
			t.Errorf("%s: domains %q, want %q", r.Name, got, w)
		}
		for _, rt := range web.GetRoutes() {
			ra := rt.GetRoute()
			for _, m := range ra.GetRequestMirrorPolicies() {
				if !m.GetDisableShadowHostSuffixAppend() || m.GetTraceSampled() == nil || m.GetTraceSampled().GetValue() {
					t.Errorf("%s: route %s: mirror %v, want disable_shadow_host_suffix_append, trace_sampled false", r.Name, rt.GetName(), m)
				}
			}
			//lint:ignore SA1019 what istiod sets
			if ra.GetMaxGrpcTimeout() == nil || ra.GetMaxGrpcTimeout().AsDuration() != ra.GetTimeout().AsDuration() {
				//lint:ignore SA1019 as above
				t.Errorf("%s: route %s: max_grpc_timeout %v, want the timeout %v", r.Name, rt.GetName(), ra.GetMaxGrpcTimeout(), ra.GetTimeout())
			}
		}
	}
}
