package rds

import (
	"maps"
	"slices"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/gentest"
)

// TestGRPCRouteForTarget: a proxyless client's route config is named as
// istiod's grpcgen names it, "outbound|PORT||HOST", and holds the virtual
// host of HOST only (no other service of the port, no catch-all), with
// the ":PORT" forms of its domains that gRPC matches the authority
// against; a port where HOST is TCP gets a config without virtual hosts.
// Before, the config was named after the dialed target ("a:7070") and
// "outbound|..." got nothing.
func TestGRPCRouteForTarget(t *testing.T) {
	const cfg = `
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: a, namespace: ns}
spec:
  hosts: [a.ns.svc.cluster.local, b.ns.svc.cluster.local]
  ports: [{number: 7070, name: grpc, protocol: GRPC}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.1}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: t, namespace: ns}
spec:
  hosts: [t.ns.svc.cluster.local]
  ports: [{number: 7070, name: tcp, protocol: TCP}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.2}]
`
	pc := gentest.MustBuild(t, cfg)
	proxy := gentest.Node(t, "sidecar~10.1.1.1~p.ns~ns.svc.cluster.local", map[string]string{"GENERATOR": "grpc"})
	names := []string{"outbound|7070||a.ns.svc.cluster.local", "outbound|7070||t.ns.svc.cluster.local", "a:7070"}
	got := gentest.ByName[*routev3.RouteConfiguration](gentest.Run(t, Generate, gen.Input{Push: pc, Proxy: proxy, Names: names}))
	if len(got) != 2 || got["a:7070"] != nil {
		t.Fatalf("route configs %v, want the two outbound|7070||HOST ones only", slices.Sorted(maps.Keys(got)))
	}
	a := got["outbound|7070||a.ns.svc.cluster.local"]
	if a.GetName() != names[0] || len(a.GetVirtualHosts()) != 1 {
		t.Fatalf("%s: %v, want one virtual host", names[0], a)
	}
	vh := a.GetVirtualHosts()[0]
	for _, d := range []string{"a.ns.svc.cluster.local", "a.ns.svc.cluster.local:7070", "a:7070", "a.ns:7070", "a.ns.svc:7070"} {
		if !slices.Contains(vh.GetDomains(), d) {
			t.Errorf("virtual host %s: domains %v lack %q", vh.GetName(), vh.GetDomains(), d)
		}
	}
	if c := vh.GetRoutes()[0].GetRoute().GetCluster(); c != names[0] {
		t.Errorf("default route to %q, want %q", c, names[0])
	}
	if tcp := got["outbound|7070||t.ns.svc.cluster.local"]; tcp == nil || len(tcp.GetVirtualHosts()) != 0 {
		t.Errorf("TCP port's config %v, want one without virtual hosts", tcp)
	}
}
