package envoyfilter_test

import (
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/xdsserver/envoyfilter"
	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/gentest"
	"github.com/baremesh/baremesh/xdsserver/gen/scope"
	"github.com/baremesh/baremesh/xdsserver/xdstype"
)

func TestRouteConfiguration(t *testing.T) {
	pc := buildWorld(t, ef("rc", "default", `
  configPatches:
  - applyTo: ROUTE_CONFIGURATION
    match: {context: SIDECAR_OUTBOUND, routeConfiguration: {portNumber: 9080}}
    patch:
      operation: MERGE
      value: {request_headers_to_add: [{header: {key: x-ef, value: "1"}}]}
  - applyTo: VIRTUAL_HOST
    match: {context: SIDECAR_OUTBOUND, routeConfiguration: {name: "9080"}}
    patch:
      operation: ADD
      value: {name: ef-vhost, domains: [ef.example.com], routes: [{match: {prefix: /}, direct_response: {status: 204}}]}
  - applyTo: VIRTUAL_HOST
    match: {context: SIDECAR_OUTBOUND, routeConfiguration: {vhost: {domainName: reviews.default.svc.cluster.local}}}
    patch: {operation: MERGE, value: {include_request_attempt_count: true}}
  - applyTo: HTTP_ROUTE
    match: {context: SIDECAR_OUTBOUND, routeConfiguration: {vhost: {domainName: reviews.default.svc.cluster.local, route: {action: ROUTE}}}}
    patch: {operation: MERGE, value: {route: {timeout: 3s}}}
  - applyTo: HTTP_ROUTE
    match: {context: SIDECAR_OUTBOUND, routeConfiguration: {vhost: {domainName: reviews.default.svc.cluster.local}}}
    patch:
      operation: INSERT_FIRST
      value: {name: ef-first, match: {prefix: /ef}, direct_response: {status: 418}}`))
	r := apply(t, pc, sidecar(t, nil))
	if len(r.problems) > 0 {
		t.Fatalf("problems: %v", r.problems)
	}
	rc := r.route(t, "9080")
	if h := rc.GetRequestHeadersToAdd(); len(h) == 0 || h[len(h)-1].GetHeader().GetKey() != "x-ef" {
		t.Errorf("9080 headers to add: %v", h)
	}
	if len(r.route(t, "8080").GetRequestHeadersToAdd()) != 0 {
		t.Error("route 8080 got the 9080 patch")
	}
	var added, reviews bool
	for _, vh := range rc.GetVirtualHosts() {
		switch {
		case vh.GetName() == "ef-vhost":
			added = true
		case strings.HasPrefix(vh.GetName(), "reviews.default.svc.cluster.local"):
			reviews = true
			if !vh.GetIncludeRequestAttemptCount() {
				t.Errorf("vhost %s not merged", vh.GetName())
			}
			rs := vh.GetRoutes()
			if rs[0].GetName() != "ef-first" || rs[0].GetDirectResponse().GetStatus() != 418 {
				t.Errorf("first route %v", rs[0])
			}
			for _, rt := range rs[1:] {
				if rt.GetRoute() != nil && rt.GetRoute().GetTimeout().AsDuration() != 3*time.Second {
					t.Errorf("route %s timeout %v, want 3s", rt.GetName(), rt.GetRoute().GetTimeout())
				}
			}
		}
	}
	if !added || !reviews {
		t.Errorf("added vhost %v, reviews vhost %v", added, reviews)
	}
}

func TestVirtualHostRemoveAndRouteRemove(t *testing.T) {
	pc := buildWorld(t, ef("rm", "default", `
  configPatches:
  - applyTo: VIRTUAL_HOST
    match: {context: SIDECAR_OUTBOUND, routeConfiguration: {portNumber: 9080, vhost: {domainName: reviews.default.svc.cluster.local}}}
    patch: {operation: REMOVE}`)+ef("rm", "istio-system", `
  configPatches:
  - applyTo: HTTP_ROUTE
    match: {context: GATEWAY, routeConfiguration: {portNumber: 80, vhost: {route: {action: ROUTE}}}}
    patch: {operation: REMOVE}`))
	r := apply(t, pc, sidecar(t, nil))
	for _, vh := range r.route(t, "9080").GetVirtualHosts() {
		if strings.HasPrefix(vh.GetName(), "reviews.") {
			t.Errorf("vhost %s not removed", vh.GetName())
		}
	}
	r = apply(t, pc, gateway(t))
	for _, vh := range r.route(t, "http.80").GetVirtualHosts() {
		for _, rt := range vh.GetRoutes() {
			if rt.GetRoute() != nil {
				t.Errorf("gateway route %s not removed", rt.GetName())
			}
		}
	}
}

func TestCluster(t *testing.T) {
	pc := buildWorld(t, ef("cds", "default", `
  configPatches:
  - applyTo: CLUSTER
    match: {context: SIDECAR_OUTBOUND, cluster: {service: reviews.default.svc.cluster.local, portNumber: 9080}}
    patch: {operation: MERGE, value: {connect_timeout: 7s}}
  - applyTo: CLUSTER
    match: {context: SIDECAR_OUTBOUND, cluster: {service: reviews.default.svc.cluster.local, subset: v2}}
    patch: {operation: MERGE, value: {per_connection_buffer_limit_bytes: 1024}}
  - applyTo: CLUSTER
    match: {cluster: {name: outbound|5432||db.default.svc.cluster.local}}
    patch: {operation: REMOVE}
  - applyTo: CLUSTER
    match: {context: SIDECAR_INBOUND, cluster: {portNumber: 8080}}
    patch: {operation: MERGE, value: {connect_timeout: 2s}}
  - applyTo: CLUSTER
    patch:
      operation: ADD
      value: {name: ef-added, type: STATIC, connect_timeout: 1s, load_assignment: {cluster_name: ef-added, endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: 9999}}}}]}]}}`))
	r := apply(t, pc, sidecar(t, nil))
	if len(r.problems) > 0 {
		t.Fatalf("problems: %v", r.problems)
	}
	for _, name := range []string{"outbound|9080||reviews.default.svc.cluster.local", "outbound|9080|v1|reviews.default.svc.cluster.local", "outbound|9080|v2|reviews.default.svc.cluster.local"} {
		if got := r.cluster(t, name).GetConnectTimeout().AsDuration(); got != 7*time.Second {
			t.Errorf("%s connect timeout %v, want 7s", name, got)
		}
	}
	if r.cluster(t, "outbound|9080|v2|reviews.default.svc.cluster.local").GetPerConnectionBufferLimitBytes().GetValue() != 1024 ||
		r.cluster(t, "outbound|9080|v1|reviews.default.svc.cluster.local").GetPerConnectionBufferLimitBytes() != nil {
		t.Error("the subset match merged the wrong subset")
	}
	if _, ok := r.res["cds"]["outbound|5432||db.default.svc.cluster.local"]; ok {
		t.Error("db cluster not removed")
	}
	if got := r.cluster(t, "inbound|8080||").GetConnectTimeout().AsDuration(); got != 2*time.Second {
		t.Errorf("inbound|8080|| connect timeout %v, want 2s", got)
	}
	if got := r.cluster(t, "outbound|8080||web.default.svc.cluster.local").GetConnectTimeout().AsDuration(); got == 2*time.Second {
		t.Error("the inbound patch reached an outbound cluster")
	}
	if n := strings.Count(strings.Join(r.order["cds"], ","), "ef-added"); n != 1 {
		t.Errorf("ef-added appears %d times (an ANY ADD adds once)", n)
	}
}

// A MERGE replaces a Duration whole, as istiod's merge does (proto merge
// would merge 10s and 0.5s field by field into 10.5s).
func TestMergeReplacesDurations(t *testing.T) {
	pc := buildWorld(t, ef("dur", "default", `
  configPatches:
  - applyTo: CLUSTER
    match: {cluster: {name: outbound|9080||reviews.default.svc.cluster.local}}
    patch: {operation: MERGE, value: {connect_timeout: 0.5s, common_lb_config: {update_merge_window: 0.25s}}}`))
	r := apply(t, pc, sidecar(t, nil))
	c := r.cluster(t, "outbound|9080||reviews.default.svc.cluster.local")
	if got := c.GetConnectTimeout().AsDuration(); got != 500*time.Millisecond {
		t.Errorf("connect timeout %v, want 500ms", got)
	}
	if got := c.GetCommonLbConfig().GetUpdateMergeWindow().AsDuration(); got != 250*time.Millisecond {
		t.Errorf("update merge window %v, want 250ms", got)
	}
}

// An inbound cluster's name carries no host: a match on service selects
// it through the services the proxy serves on its port, as istiod does.
func TestInboundClusterByService(t *testing.T) {
	pc := buildWorld(t, ef("in", "default", `
  configPatches:
  - applyTo: CLUSTER
    match: {context: SIDECAR_INBOUND, cluster: {service: web.default.svc.cluster.local, portNumber: 8080}}
    patch: {operation: MERGE, value: {per_connection_buffer_limit_bytes: 16384}}
  - applyTo: CLUSTER
    match: {context: SIDECAR_INBOUND, cluster: {service: reviews.default.svc.cluster.local}}
    patch: {operation: MERGE, value: {connect_timeout: 9s}}`))
	p := sidecar(t, nil)
	set := envoyfilter.Compile(pc.Configs(config.EnvoyFilter), pc.Mesh.GetRootNamespace())
	ps := set.Select(p)
	if !ps.NeedsInboundHosts() {
		t.Fatal("NeedsInboundHosts false with a service match")
	}
	hosts := map[uint32][]string{}
	for _, inst := range scope.Inbound(pc, p) {
		hosts[inst.TargetPort] = append(hosts[inst.TargetPort], inst.Service.Hostname)
	}
	in := gentest.Run(t, xdstype.Cluster.Generate, gen.Input{Push: pc, Proxy: p})
	out, problems := envoyfilter.Apply(xdstype.Cluster.URL, in, p, ps.WithInboundHosts(hosts))
	gentest.Validate(t, out)
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	for _, r := range out {
		c := r.Resource.(*clusterv3.Cluster)
		switch r.Name {
		case "inbound|8080||":
			if c.GetPerConnectionBufferLimitBytes().GetValue() != 16384 {
				t.Errorf("%s not patched", r.Name)
			}
		case "inbound|9000||":
			if c.GetPerConnectionBufferLimitBytes() != nil {
				t.Errorf("%s patched (port 9000 is not 8080)", r.Name)
			}
		}
		if c.GetConnectTimeout().AsDuration() == 9*time.Second {
			t.Errorf("%s: matched a service the proxy does not serve", r.Name)
		}
	}
}
