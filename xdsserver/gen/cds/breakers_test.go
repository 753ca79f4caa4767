package cds

import (
	"math"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/gentest"
)

// TestCircuitBreakersAsIstiod: every Envoy cluster istiod gives a
// connection pool to (outbound of every resolution and subset, inbound,
// PassthroughCluster, InboundPassthroughCluster; not BlackHoleCluster)
// carries Istio's unlimited thresholds, a DestinationRule's
// connectionPool replacing only what it sets; proxyless gRPC gets
// max_requests only, and only from http2MaxRequests. Before, clusters
// without a connectionPool had none (Envoy's 1024 and 3 retries).
func TestCircuitBreakersAsIstiod(t *testing.T) {
	const cfg = `
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: a, namespace: ns}
spec:
  hosts: [a.ns.svc.cluster.local]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.1, labels: {v: "1"}}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: dns, namespace: ns}
spec:
  hosts: [dns.example.com]
  ports: [{number: 443, name: tls, protocol: TLS}]
  resolution: DNS
  location: MESH_EXTERNAL
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: none, namespace: ns}
spec:
  hosts: [none.example.com]
  ports: [{number: 9000, name: tcp, protocol: TCP}]
  resolution: NONE
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: a, namespace: ns}
spec:
  host: a.ns.svc.cluster.local
  trafficPolicy:
    connectionPool: {tcp: {maxConnections: 7}, http: {http2MaxRequests: 9}}
  subsets:
  - name: v1
    labels: {v: "1"}
    trafficPolicy: {connectionPool: {http: {maxRetries: 2, http1MaxPendingRequests: 5}}}
---
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: s, namespace: ns}
spec:
  egress: [{hosts: ["*/*"]}]
  ingress: [{port: {number: 8080, name: http, protocol: HTTP}, defaultEndpoint: "127.0.0.1:8081"}]
`
	pc := gentest.MustBuild(t, cfg)
	generate := func(meta map[string]string) map[string]*clusterv3.Cluster {
		proxy := gentest.Node(t, "sidecar~10.1.1.1~p.ns~ns.svc.cluster.local", meta)
		return gentest.ByName[*clusterv3.Cluster](gentest.Run(t, Generate, gen.Input{Push: pc, Proxy: proxy}))
	}
	const max = math.MaxUint32
	type limits struct{ conns, pending, requests, retries uint32 }
	check := func(t *testing.T, c *clusterv3.Cluster, want *limits) {
		t.Helper()
		ths := c.GetCircuitBreakers().GetThresholds()
		if want == nil {
			if ths != nil {
				t.Errorf("%s: circuit breakers %v, want none", c.GetName(), ths)
			}
			return
		}
		if len(ths) != 1 {
			t.Errorf("%s: thresholds %v, want one", c.GetName(), ths)
			return
		}
		th := ths[0]
		got := limits{th.GetMaxConnections().GetValue(), th.GetMaxPendingRequests().GetValue(), th.GetMaxRequests().GetValue(), th.GetMaxRetries().GetValue()}
		if got != *want || th.GetPriority() != corev3.RoutingPriority_DEFAULT || th.GetTrackRemaining() {
			t.Errorf("%s: thresholds %v, want %+v, track_remaining off", c.GetName(), th, *want)
		}
	}
	t.Run("sidecar", func(t *testing.T) {
		cs := generate(nil)
		all := &limits{max, max, max, max}
		for name, want := range map[string]*limits{
			"outbound|80||a.ns.svc.cluster.local":   {7, max, 9, max},
			"outbound|80|v1|a.ns.svc.cluster.local": {max, 5, max, 2}, // the subset's pool replaces the whole pool, as istiod's MergeTrafficPolicy
			"outbound|443||dns.example.com":         all,
			"outbound|9000||none.example.com":       all,
			"inbound|8080||":                        all,
			gen.PassthroughCluster:                  all,
			gen.InboundPassthroughCluster:           all,
			gen.BlackHoleCluster:                    nil,
		} {
			c := cs[name]
			if c == nil {
				t.Errorf("no cluster %s (have %d)", name, len(cs))
				continue
			}
			check(t, c, want)
		}
	})
	t.Run("proxyless", func(t *testing.T) {
		cs := generate(map[string]string{"GENERATOR": "grpc"})
		check(t, cs["outbound|80||a.ns.svc.cluster.local"], &limits{requests: 9})
		check(t, cs["outbound|443||dns.example.com"], nil)
	})
}
