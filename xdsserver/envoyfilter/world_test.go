package envoyfilter_test

import (
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/proto"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/core/push"
	"github.com/baremesh/baremesh/xdsserver/envoyfilter"
	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/gentest"
	"github.com/baremesh/baremesh/xdsserver/xdstype"
)

// world: the proxy "web" (10.0.0.1, app=web, namespace default) serves
// HTTP 8080 and TCP 9000; it calls reviews (HTTP 9080, subsets v1/v2)
// and db (TCP 5432). A gateway (istio=ingressgateway, namespace
// istio-system) serves web.example.com on 80.
const world = `
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: web, namespace: default}
spec:
  hosts: [web.default.svc.cluster.local]
  location: MESH_INTERNAL
  ports: [{number: 8080, name: http, protocol: HTTP}, {number: 9000, name: tcp, protocol: TCP}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.1, labels: {app: web}, serviceAccount: web}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: reviews, namespace: default}
spec:
  hosts: [reviews.default.svc.cluster.local]
  location: MESH_INTERNAL
  ports: [{number: 9080, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.2, labels: {app: reviews, version: v1}}, {address: 10.0.0.3, labels: {app: reviews, version: v2}}]
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: reviews, namespace: default}
spec:
  host: reviews.default.svc.cluster.local
  subsets: [{name: v1, labels: {version: v1}}, {name: v2, labels: {version: v2}}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: db, namespace: default}
spec:
  hosts: [db.default.svc.cluster.local]
  addresses: [10.1.0.5]
  location: MESH_INTERNAL
  ports: [{number: 5432, name: tcp, protocol: TCP}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.4}]
---
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: gw, namespace: istio-system}
spec:
  selector: {istio: ingressgateway}
  servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: ["*/web.example.com"]}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: web, namespace: default}
spec:
  hosts: [web.example.com]
  gateways: [istio-system/gw]
  http: [{route: [{destination: {host: web.default.svc.cluster.local, port: {number: 8080}}}]}]
`

// buildWorld is the snapshot of the world and extra.
func buildWorld(t testing.TB, extra string) *push.PushContext {
	t.Helper()
	return gentest.MustBuild(t, world, extra)
}

// sidecar is web's sidecar; md adds node metadata.
func sidecar(t testing.TB, md map[string]string) *model.Proxy {
	return node(t, "sidecar~10.0.0.1~web.default~default.svc.cluster.local", map[string]string{"app": "web"}, md)
}

// gateway is the ingress gateway.
func gateway(t testing.TB) *model.Proxy {
	return node(t, "router~10.0.0.9~gw.istio-system~istio-system.svc.cluster.local", map[string]string{"istio": "ingressgateway"}, nil)
}

// node is an istio-proxy (ISTIO_VERSION 1.31.0) with labels and the
// node metadata md.
func node(t testing.TB, id string, labels, md map[string]string) *model.Proxy {
	t.Helper()
	meta := map[string]string{"ISTIO_VERSION": "1.31.0"}
	for k, v := range md {
		meta[k] = v
	}
	return gentest.ProxySpec{ID: id, Metadata: meta, Labels: labels}.Proxy(t)
}

// generated is every LDS, RDS and CDS resource for p, by type URL.
func generated(t testing.TB, pc *push.PushContext, p *model.Proxy) map[string][]gen.Resource {
	t.Helper()
	out := map[string][]gen.Resource{}
	for _, ty := range []*xdstype.Type{xdstype.Listener, xdstype.Cluster} {
		out[ty.URL] = gentest.Run(t, ty.Generate, gen.Input{Push: pc, Proxy: p})
	}
	out[xdstype.Route.URL] = gentest.Run(t, xdstype.Route.Generate, gen.Input{Push: pc, Proxy: p, Names: gentest.RouteNames(out[xdstype.Listener.URL])})
	return out
}

// result is a patched output: type short name ("lds", "rds", "cds") →
// resource name → resource, and the problems.
type result struct {
	res      map[string]map[string]proto.Message
	order    map[string][]string
	problems []envoyfilter.Problem
}

var shorts = map[string]string{xdstype.Listener.URL: "lds", xdstype.Route.URL: "rds", xdstype.Cluster.URL: "cds"}

// apply generates p's config in pc, applies pc's EnvoyFilters, checks
// every output resource with ValidateAll and that the generated
// resources were not altered.
func apply(t testing.TB, pc *push.PushContext, p *model.Proxy) result {
	t.Helper()
	set := envoyfilter.Compile(pc.Configs(config.EnvoyFilter), pc.Mesh.GetRootNamespace())
	ps := set.Select(p)
	r := result{res: map[string]map[string]proto.Message{}, order: map[string][]string{}, problems: set.Problems()}
	for u, in := range generated(t, pc, p) {
		before := make([]proto.Message, len(in))
		for i, x := range in {
			before[i] = proto.Clone(x.Resource)
		}
		out, problems := envoyfilter.Apply(u, in, p, ps)
		for i, x := range in {
			if !proto.Equal(before[i], x.Resource) {
				t.Errorf("%s %s: the generated resource was altered", shorts[u], x.Name)
			}
		}
		gentest.Validate(t, out)
		r.problems = append(r.problems, problems...)
		m := map[string]proto.Message{}
		for _, x := range out {
			m[x.Name] = x.Resource
			r.order[shorts[u]] = append(r.order[shorts[u]], x.Name)
		}
		r.res[shorts[u]] = m
	}
	return r
}

func (r result) listener(t testing.TB, name string) *listenerv3.Listener {
	t.Helper()
	return resourceOf[*listenerv3.Listener](t, r, "lds", name)
}

func (r result) cluster(t testing.TB, name string) *clusterv3.Cluster {
	t.Helper()
	return resourceOf[*clusterv3.Cluster](t, r, "cds", name)
}

func (r result) route(t testing.TB, name string) *routev3.RouteConfiguration {
	t.Helper()
	return resourceOf[*routev3.RouteConfiguration](t, r, "rds", name)
}

// nouns name a resource of each type short name in failures.
var nouns = map[string]string{"lds": "listener", "rds": "route configuration", "cds": "cluster"}

// resourceOf is r's resource of type short named name, or t fails.
func resourceOf[T proto.Message](t testing.TB, r result, short, name string) T {
	t.Helper()
	m, ok := r.res[short][name].(T)
	if !ok {
		t.Fatalf("no %s %q (have %v)", nouns[short], name, r.order[short])
	}
	return m
}

// hcm is the HTTP connection manager of fc, nil if it has none.
func hcm(t testing.TB, fc *listenerv3.FilterChain) *hcmv3.HttpConnectionManager {
	t.Helper()
	for _, f := range fc.GetFilters() {
		if f.GetName() == "envoy.filters.network.http_connection_manager" {
			h := &hcmv3.HttpConnectionManager{}
			if err := f.GetTypedConfig().UnmarshalTo(h); err != nil {
				t.Fatal(err)
			}
			return h
		}
	}
	return nil
}

// httpFilters are the HTTP filter names of fc's connection manager.
func httpFilters(t testing.TB, fc *listenerv3.FilterChain) []string {
	t.Helper()
	var out []string
	for _, f := range hcm(t, fc).GetHttpFilters() {
		out = append(out, f.GetName())
	}
	return out
}

func networkFilters(fc *listenerv3.FilterChain) []string {
	var out []string
	for _, f := range fc.GetFilters() {
		out = append(out, f.GetName())
	}
	return out
}

// inboundChain is virtualInbound's chain for destination port port and
// transport "raw_buffer" or "tls" (the plaintext one by default).
func inboundChain(t testing.TB, l *listenerv3.Listener, port uint32) *listenerv3.FilterChain {
	t.Helper()
	for _, fc := range l.GetFilterChains() {
		m := fc.GetFilterChainMatch()
		if m.GetDestinationPort().GetValue() == port && m.GetTransportProtocol() != "tls" {
			return fc
		}
	}
	t.Fatalf("virtualInbound has no plaintext chain for port %d", port)
	return nil
}

// ef is an EnvoyFilter document.
func ef(name, ns, spec string) string {
	return "---\napiVersion: networking.istio.io/v1alpha3\nkind: EnvoyFilter\nmetadata: {name: " + name + ", namespace: " + ns + "}\nspec:\n" + spec + "\n"
}
