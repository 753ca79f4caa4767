package cds

import (
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/durationpb"
	meshconfig "istio.io/api/mesh/v1alpha1"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/gentest"
)

// TestProtocolOptionsAsIstiod: a connection pool's settings reach the
// upstream HTTP protocol options as istiod's applyConnectionPool puts
// them, TCP clusters included (their idle timeout and maximum duration
// are Envoy's common HTTP options there too); h2UpgradePolicy UPGRADE
// makes an HTTP port's cluster HTTP/2, with the pool's stream limit and
// keepalive, and its mTLS offers h2; useClientProtocol turns an HTTP/2
// port's cluster to the downstream protocol, without h2 in its ALPN.
// Before, only HTTP idle timeout and requests per connection were
// carried.
func TestProtocolOptionsAsIstiod(t *testing.T) {
	pc := gentest.MustBuild(t, `
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: svc, namespace: default}
spec:
  hosts: [svc.example.internal]
  location: MESH_INTERNAL
  ports:
  - {number: 5432, name: tcp, protocol: TCP}
  - {number: 8080, name: http, protocol: HTTP}
  - {number: 9090, name: grpc, protocol: GRPC}
  resolution: STATIC
  endpoints: [{address: 10.0.0.9}]
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: svc, namespace: default}
spec:
  host: svc.example.internal
  trafficPolicy:
    connectionPool:
      tcp: {idleTimeout: 30m, maxConnectionDuration: 2h}
    portLevelSettings:
    - port: {number: 8080}
      connectionPool:
        tcp: {idleTimeout: 30m}
        http: {h2UpgradePolicy: UPGRADE, maxConcurrentStreams: 64, http2KeepAlive: {interval: 10s, timeout: 5s}}
    - port: {number: 9090}
      connectionPool: {http: {useClientProtocol: true}}
`)
	p := gentest.Node(t, "sidecar~10.0.0.1~a.default~default.svc.cluster.local", nil)
	cs := gentest.ByName[*clusterv3.Cluster](gentest.Run(t, Generate, gen.Input{Push: pc, Proxy: p}))
	opts := func(name string) string {
		c := cs[name]
		if c == nil {
			t.Fatalf("no cluster %s", name)
		}
		a := c.GetTypedExtensionProtocolOptions()[httpProtocolOptionsKey]
		if a == nil {
			return ""
		}
		o := &httpv3.HttpProtocolOptions{}
		if err := a.UnmarshalTo(o); err != nil {
			t.Fatal(err)
		}
		b, _ := protojson.Marshal(o)
		return string(b)
	}
	norm := func(s string) string {
		o := &httpv3.HttpProtocolOptions{}
		if err := protojson.Unmarshal([]byte(s), o); err != nil {
			t.Fatal(err)
		}
		b, _ := protojson.Marshal(o)
		return string(b)
	}
	for name, want := range map[string]string{
		"outbound|5432||svc.example.internal": `{"commonHttpProtocolOptions":{"idleTimeout":"1800s","maxConnectionDuration":"7200s"},"explicitHttpConfig":{"httpProtocolOptions":{}}}`,
		"outbound|8080||svc.example.internal": `{"commonHttpProtocolOptions":{"idleTimeout":"1800s"},"explicitHttpConfig":{"http2ProtocolOptions":{"maxConcurrentStreams":64,"connectionKeepalive":{"interval":"10s","timeout":"5s"}}}}`,
		"outbound|9090||svc.example.internal": `{"useDownstreamProtocolConfig":{"httpProtocolOptions":{},"http2ProtocolOptions":{}}}`,
	} {
		if got := opts(name); got != norm(want) {
			t.Errorf("%s:\n got %s\nwant %s", name, got, norm(want))
		}
	}
	alpn := func(name string) []string {
		for _, m := range cs[name].GetTransportSocketMatches() {
			if m.GetName() == "tlsMode-istio" {
				return upstreamTLS(t, m.GetTransportSocket()).GetCommonTlsContext().GetAlpnProtocols()
			}
		}
		t.Fatalf("%s: no mTLS match", name)
		return nil
	}
	if got := alpn("outbound|8080||svc.example.internal"); len(got) != 3 || got[2] != "h2" {
		t.Errorf("upgraded HTTP port: ALPN %v, want h2 last", got)
	}
	if got := alpn("outbound|9090||svc.example.internal"); len(got) != 2 {
		t.Errorf("gRPC port with useClientProtocol: ALPN %v, want no h2", got)
	}
}

// TestMeshClusterDefaults: the mesh's connectTimeout and tcpKeepalive
// reach the clusters no DestinationRule shapes (the passthrough ones,
// inbound clusters; BlackHoleCluster its timeout only), its keepalive
// every outbound cluster, and outboundClusterStatName names an outbound
// cluster's stats, as istiod. Before, these clusters kept 10 s and no
// keepalive, and the pattern was ignored.
func TestMeshClusterDefaults(t *testing.T) {
	pc := gentest.MustBuild(t, `
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: svc, namespace: default}
spec:
  hosts: [svc.example.internal]
  location: MESH_INTERNAL
  ports: [{number: 5432, name: tcp-db, protocol: TCP}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.9}]
`)
	pc.Mesh = &meshconfig.MeshConfig{ConnectTimeout: durationpb.New(5e9), TcpKeepalive: &networking.ConnectionPoolSettings_TCPSettings_TcpKeepalive{Time: durationpb.New(600e9)},
		OutboundClusterStatName: "%SERVICE%_%SERVICE_PORT_NAME%"}
	p := gentest.Node(t, "sidecar~10.0.0.1~a.default~default.svc.cluster.local", map[string]string{"ISTIO_VERSION": "1.31.0"})
	cs := gentest.ByName[*clusterv3.Cluster](gentest.Run(t, Generate, gen.Input{Push: pc, Proxy: p}))
	for _, name := range []string{gen.PassthroughCluster, gen.InboundPassthroughCluster, gen.BlackHoleCluster, "outbound|5432||svc.example.internal"} {
		c := cs[name]
		keep := c.GetUpstreamConnectionOptions().GetTcpKeepalive().GetKeepaliveTime().GetValue()
		if name != "outbound|5432||svc.example.internal" && c.GetConnectTimeout().AsDuration() != 5e9 {
			t.Errorf("%s: connect timeout %v, want the mesh's 5s", name, c.GetConnectTimeout())
		}
		if want := uint32(600); name != gen.BlackHoleCluster && keep != want {
			t.Errorf("%s: keepalive time %d, want the mesh's %d", name, keep, want)
		}
	}
	if got := cs["outbound|5432||svc.example.internal"].GetAltStatName(); got != "svc.example.internal_tcp-db;" {
		t.Errorf("alt_stat_name %q, want the mesh's pattern", got)
	}
}

// TestInboundPool: a sidecar's inbound clusters take a connection pool
// as istiod's buildInboundCluster: an ingress listener's own, else the
// Sidecar's inboundConnectionPool (limits, connect timeout, HTTP
// options); with neither, the mesh's defaultTrafficPolicy pool also
// reaches PassthroughCluster's limits. Before, inbound clusters kept
// Istio's unlimited defaults whatever was set.
func TestInboundPool(t *testing.T) {
	pc := gentest.MustBuild(t, `
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: vm, namespace: default}
spec:
  workloadSelector: {labels: {app: vm}}
  inboundConnectionPool:
    tcp: {maxConnections: 50, connectTimeout: 2s}
  ingress:
  - port: {number: 8080, protocol: HTTP, name: http}
    defaultEndpoint: 127.0.0.1:8080
    connectionPool: {http: {http2MaxRequests: 200, maxRequestsPerConnection: 10}}
  - port: {number: 9000, protocol: TCP, name: tcp}
    defaultEndpoint: 127.0.0.1:9000
`)
	pc.Mesh = &meshconfig.MeshConfig{DefaultTrafficPolicy: &meshconfig.MeshConfig_DefaultTrafficPolicy{
		ConnectionPool: &networking.ConnectionPoolSettings{Tcp: &networking.ConnectionPoolSettings_TCPSettings{MaxConnections: 500}}}}
	p := gentest.ProxySpec{ID: "sidecar~10.0.0.1~vm.default~default.svc.cluster.local", Labels: map[string]string{"app": "vm"}}.Proxy(t)
	cs := gentest.ByName[*clusterv3.Cluster](gentest.Run(t, Generate, gen.Input{Push: pc, Proxy: p}))
	limits := func(name string) (uint32, uint32) {
		th := cs[name].GetCircuitBreakers().GetThresholds()[0]
		return th.GetMaxConnections().GetValue(), th.GetMaxRequests().GetValue()
	}
	if conns, reqs := limits("inbound|8080||"); reqs != 200 || conns == 50 {
		t.Errorf("inbound|8080||: max connections %d, requests %d; want the ingress listener's pool (requests 200, not the Sidecar's 50 connections)", conns, reqs)
	}
	if conns, _ := limits("inbound|9000||"); conns != 50 || cs["inbound|9000||"].GetConnectTimeout().AsDuration() != 2e9 {
		t.Errorf("inbound|9000||: max connections %d, connect timeout %v; want the Sidecar's inboundConnectionPool", conns, cs["inbound|9000||"].GetConnectTimeout())
	}
	if conns, _ := limits(gen.PassthroughCluster); conns != 500 {
		t.Errorf("PassthroughCluster: max connections %d, want the mesh default pool's 500", conns)
	}
}
