package lds

import (
	"slices"
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"

	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/gentest"
)

// egressConfig is Istio's egress gateway task for a TLS host (SNI
// routing through the gateway: a TLS rule for the mesh and one for the
// gateway, both on port 443), a TLS service with an address of its own,
// and a TCP rule with weighted destinations bound to the gateway.
const egressConfig = `
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: egress, namespace: istio-system}
spec:
  hosts: [egress.istio-system.svc.cluster.local]
  addresses: [10.96.7.1]
  ports: [{number: 443, name: tls, protocol: TLS}, {number: 5432, name: tcp, protocol: TCP}]
  resolution: STATIC
  endpoints: [{address: 10.0.7.1}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: wiki, namespace: default}
spec:
  hosts: [www.wikipedia.org]
  ports: [{number: 443, name: tls, protocol: TLS}]
  resolution: DNS
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: db, namespace: default}
spec:
  hosts: [db.example.com]
  ports: [{number: 5432, name: tcp, protocol: TCP}]
  resolution: DNS
---
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: egress, namespace: default}
spec:
  selector: {istio: egressgateway}
  servers:
  - port: {number: 443, name: tls, protocol: TLS}
    hosts: [www.wikipedia.org]
    tls: {mode: PASSTHROUGH}
  - port: {number: 5432, name: tcp, protocol: TCP}
    hosts: [db.example.com]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: wiki, namespace: default}
spec:
  hosts: [www.wikipedia.org]
  gateways: [mesh, egress]
  tls:
  - match: [{gateways: [mesh], port: 443, sniHosts: [www.wikipedia.org]}]
    route: [{destination: {host: egress.istio-system.svc.cluster.local, subset: wiki, port: {number: 443}}}]
  - match: [{gateways: [egress], port: 443, sniHosts: [www.wikipedia.org]}]
    route: [{destination: {host: www.wikipedia.org, port: {number: 443}}}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: db, namespace: default}
spec:
  hosts: [db.example.com]
  gateways: [default/egress]
  tcp:
  - match: [{gateways: [other/egress]}]
    route: [{destination: {host: nowhere.example.com}}]
  - match: [{port: 5432, gateways: [egress.default.svc.cluster.local]}]
    route:
    - {destination: {host: db.example.com, subset: a}, weight: 90}
    - {destination: {host: db.example.com, subset: b}, weight: 10}
    - {destination: {host: db.example.com, subset: c}, weight: 0}
`

func tcpProxyOf(t *testing.T, fc *listenerv3.FilterChain) *tcpproxyv3.TcpProxy {
	t.Helper()
	tp := &tcpproxyv3.TcpProxy{}
	for _, f := range fc.GetFilters() {
		if f.GetName() == tcpProxyName {
			if err := f.GetTypedConfig().UnmarshalTo(tp); err != nil {
				t.Fatal(err)
			}
			return tp
		}
	}
	t.Fatalf("no tcp_proxy in %v", fc)
	return nil
}

// TestSidecarTLSRoutes: as istiod's buildSidecarOutboundTLSFilterChainOpts,
// a TLS rule for the mesh routes a host's SNI (to the egress gateway
// here) and names its VirtualService; a TLS service with an address of
// its own gets one chain for every connection, with no SNI match and no
// TLS inspector (before: an SNI chain, a default chain and the
// inspector, which istiod does not make).
func TestSidecarTLSRoutes(t *testing.T) {
	pc := gentest.MustBuild(t, egressConfig)
	p := gentest.Node(t, "sidecar~10.0.0.1~a.default~default.svc.cluster.local", nil)
	ls := gentest.ByName[*listenerv3.Listener](gentest.Run(t, Generate, gen.Input{Push: pc, Proxy: p}))

	l := ls["0.0.0.0_443"]
	if len(l.GetFilterChains()) != 1 {
		t.Fatalf("0.0.0.0_443: %d chains, want the SNI chain of the TLS rule", len(l.GetFilterChains()))
	}
	fc := l.GetFilterChains()[0]
	if got := fc.GetFilterChainMatch().GetServerNames(); !slices.Equal(got, []string{"www.wikipedia.org"}) {
		t.Errorf("0.0.0.0_443 server names %v", got)
	}
	if got := tcpProxyOf(t, fc).GetCluster(); got != "outbound|443|wiki|egress.istio-system.svc.cluster.local" {
		t.Errorf("0.0.0.0_443 goes to %q, want the gateway's subset (the mesh rule)", got)
	}
	if fc.GetMetadata() == nil {
		t.Error("the chain of a TLS rule names no VirtualService")
	}

	l = ls["10.96.7.1_443"]
	if len(l.GetFilterChains()) != 1 || l.GetFilterChains()[0].GetFilterChainMatch() != nil || l.GetDefaultFilterChain() != nil || len(l.GetListenerFilters()) != 0 {
		t.Errorf("10.96.7.1_443: chains %v, default %v, listener filters %v; want one chain matching every connection", l.GetFilterChains(), l.GetDefaultFilterChain(), l.GetListenerFilters())
	}
}

// TestGatewayL4Routes: a router's passthrough and TCP servers take the
// rules whose match gateways name its Gateway (a short name, "ns/name"
// and the legacy FQDN are all the VirtualService's namespace's Gateway,
// istiod's resolveGatewayName) and port; a rule for the mesh or another
// Gateway is skipped; several destinations are weighted clusters
// (weight 0 left out) named after the VirtualService.
func TestGatewayL4Routes(t *testing.T) {
	pc := gentest.MustBuild(t, egressConfig)
	p := gentest.ProxySpec{ID: "router~10.0.0.2~egress-1.istio-system~istio-system.svc.cluster.local", Labels: map[string]string{"istio": "egressgateway"}}.Proxy(t)
	ls := gentest.ByName[*listenerv3.Listener](gentest.Run(t, Generate, gen.Input{Push: pc, Proxy: p}))

	l := ls["0.0.0.0_443"]
	if len(l.GetFilterChains()) != 1 {
		t.Fatalf("0.0.0.0_443: %d chains, want one", len(l.GetFilterChains()))
	}
	if got := tcpProxyOf(t, l.GetFilterChains()[0]).GetCluster(); got != "outbound|443||www.wikipedia.org" {
		t.Errorf("passthrough goes to %q, want the gateway rule's destination", got)
	}

	l = ls["0.0.0.0_5432"]
	if len(l.GetFilterChains()) != 1 {
		t.Fatalf("0.0.0.0_5432: %d chains, want one", len(l.GetFilterChains()))
	}
	tp := tcpProxyOf(t, l.GetFilterChains()[0])
	var got []string
	for _, c := range tp.GetWeightedClusters().GetClusters() {
		got = append(got, c.GetName())
	}
	if want := []string{"outbound|5432|a|db.example.com", "outbound|5432|b|db.example.com"}; !slices.Equal(got, want) || tp.GetStatPrefix() != "db.default" {
		t.Errorf("TCP server: weighted %v, stat prefix %q; want %v, db.default", got, tp.GetStatPrefix(), want)
	}
}

// TestTCPProxyPool: a tcp_proxy carries its destination's
// DestinationRule: the TCP pool's idle timeout and maximum connection
// duration, and a source IP hash where the rule hashes by source IP and
// the route's subset does not balance otherwise (istiod's
// maybeSetHashPolicy). Before, neither reached the listener.
func TestTCPProxyPool(t *testing.T) {
	pc := gentest.MustBuild(t, `
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: pg, namespace: default}
spec:
  hosts: [pg.example.internal]
  addresses: [10.96.9.1]
  ports: [{number: 5432, name: tcp, protocol: TCP}]
  resolution: STATIC
  endpoints: [{address: 10.0.9.1, labels: {role: a}}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: mq, namespace: default}
spec:
  hosts: [mq.example.internal]
  addresses: [10.96.9.2]
  ports: [{number: 5672, name: tcp, protocol: TCP}]
  resolution: STATIC
  endpoints: [{address: 10.0.9.2}]
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: pg, namespace: default}
spec:
  host: pg.example.internal
  trafficPolicy:
    loadBalancer: {consistentHash: {useSourceIp: true}}
    connectionPool: {tcp: {idleTimeout: 30m, maxConnectionDuration: 2h}}
  subsets:
  - {name: a, labels: {role: a}, trafficPolicy: {loadBalancer: {simple: ROUND_ROBIN}}}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: mq, namespace: default}
spec:
  hosts: [mq.example.internal]
  tcp: [{route: [{destination: {host: pg.example.internal, subset: a}}]}]
`)
	p := gentest.Node(t, "sidecar~10.0.0.1~a.default~default.svc.cluster.local", nil)
	ls := gentest.ByName[*listenerv3.Listener](gentest.Run(t, Generate, gen.Input{Push: pc, Proxy: p}))
	tp := tcpProxyOf(t, ls["10.96.9.1_5432"].GetFilterChains()[0])
	if tp.GetIdleTimeout().AsDuration().Minutes() != 30 || tp.GetMaxDownstreamConnectionDuration().AsDuration().Hours() != 2 || len(tp.GetHashPolicy()) != 1 {
		t.Errorf("pg: idle %v, max duration %v, hash %v; want 30m, 2h, source IP", tp.GetIdleTimeout(), tp.GetMaxDownstreamConnectionDuration(), tp.GetHashPolicy())
	}
	tp = tcpProxyOf(t, ls["10.96.9.2_5672"].GetFilterChains()[0])
	if tp.GetCluster() != "outbound|5432|a|pg.example.internal" || tp.GetIdleTimeout() == nil || len(tp.GetHashPolicy()) != 0 {
		t.Errorf("mq routed to pg's subset a: cluster %s, idle %v, hash %v; want pg's pool, no hash (the subset balances round robin)", tp.GetCluster(), tp.GetIdleTimeout(), tp.GetHashPolicy())
	}
}
