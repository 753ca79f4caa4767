package cds

import (
	"maps"
	"slices"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"

	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/gentest"
)

// istiodDefaultsConfig has an HTTP and a gRPC port (auto mTLS), one
// service with ISTIO_MUTUAL and outlier detection, one with SIMPLE TLS
// from a credential, and the proxy's own workload.
const istiodDefaultsConfig = `
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: web, namespace: default}
spec:
  hosts: [web.default.svc.cluster.local]
  location: MESH_INTERNAL
  ports: [{number: 8080, name: http, protocol: HTTP}, {number: 7070, name: grpc, protocol: GRPC}, {number: 9000, name: auto}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.1, labels: {security.istio.io/tlsMode: istio}}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: api, namespace: default}
spec:
  hosts: [api.default.svc.cluster.local]
  location: MESH_INTERNAL
  ports: [{number: 9090, name: grpc, protocol: GRPC}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.2}]
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: api, namespace: default}
spec:
  host: api.default.svc.cluster.local
  trafficPolicy:
    tls: {mode: ISTIO_MUTUAL}
    outlierDetection: {consecutive5xxErrors: 5, minHealthPercent: 20}
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: ext, namespace: default}
spec:
  hosts: [ext.example.com]
  location: MESH_EXTERNAL
  ports: [{number: 443, name: h2, protocol: HTTP2}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.3}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: dns, namespace: default}
spec:
  hosts: [dns.example.com]
  ports: [{number: 443, name: tls, protocol: TLS}]
  resolution: DNS
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: ext, namespace: default}
spec:
  host: ext.example.com
  trafficPolicy:
    tls: {mode: SIMPLE, credentialName: ext-ca}
`

// TestIstiodClusterDefaults checks the cluster settings istiod writes
// beside the traffic policy, as the parity run against istiod shows
// them (issue #25: outbound-panic-threshold, inbound-cleanup-interval,
// initial-fetch-timeout, upstream-alpn-h2, passthrough-http-options,
// proxyless connect_timeout / resource_api_version).
func TestIstiodClusterDefaults(t *testing.T) {
	pc := gentest.MustBuild(t, istiodDefaultsConfig)
	sidecar := gentest.Node(t, "sidecar~10.0.0.1~web.default~default.svc.cluster.local", map[string]string{"ISTIO_VERSION": "1.28.0"})
	cs := gentest.ByName[*clusterv3.Cluster](gentest.Run(t, Generate, gen.Input{Push: pc, Proxy: sidecar}))
	get := func(name string) *clusterv3.Cluster {
		t.Helper()
		c := cs[name]
		if c == nil {
			t.Fatalf("no cluster %s; have %v", name, slices.Collect(maps.Keys(cs)))
		}
		return c
	}

	// Panic mode off on outbound clusters unless minHealthPercent says.
	for name, want := range map[string]float64{
		"outbound|8080||web.default.svc.cluster.local": 0,
		"outbound|9090||api.default.svc.cluster.local": 20,
		"outbound|443||ext.example.com":                0,
	} {
		th := get(name).GetCommonLbConfig().GetHealthyPanicThreshold()
		if th == nil || th.GetValue() != want {
			t.Errorf("%s: healthy_panic_threshold %v, want %v", name, th, want)
		}
	}

	// Inbound ORIGINAL_DST: hosts never cleaned up; common_lb_config empty.
	in := get("inbound|8080||")
	if got := in.GetCleanupInterval().GetSeconds(); got != 9223372035 {
		t.Errorf("inbound|8080||: cleanup_interval %ds, want 9223372035s", got)
	}
	if in.GetCommonLbConfig() == nil || in.GetCommonLbConfig().GetHealthyPanicThreshold() != nil {
		t.Errorf("inbound|8080||: common_lb_config %v, want {}", in.GetCommonLbConfig())
	}

	// Every config source waits forever (initial_fetch_timeout 0s),
	// but a credentialName secret's, which may never exist.
	zeroTimeout := func(what string, cs *corev3.ConfigSource) {
		t.Helper()
		if d := cs.GetInitialFetchTimeout(); d == nil || d.AsDuration() != 0 {
			t.Errorf("%s: initial_fetch_timeout %v, want 0s", what, d)
		}
	}
	web := get("outbound|8080||web.default.svc.cluster.local")
	zeroTimeout("web EDS", web.GetEdsClusterConfig().GetEdsConfig())
	mtls := upstreamTLS(t, web.GetTransportSocketMatches()[0].GetTransportSocket())
	zeroTimeout("web default SDS", mtls.GetCommonTlsContext().GetTlsCertificateSdsSecretConfigs()[0].GetSdsConfig())
	zeroTimeout("web ROOTCA SDS", mtls.GetCommonTlsContext().GetCombinedValidationContext().GetValidationContextSdsSecretConfig().GetSdsConfig())
	ext := upstreamTLS(t, get("outbound|443||ext.example.com").GetTransportSocket())
	if d := ext.GetCommonTlsContext().GetCombinedValidationContext().GetValidationContextSdsSecretConfig().GetSdsConfig().GetInitialFetchTimeout(); d != nil {
		t.Errorf("ext credential SDS: initial_fetch_timeout %v, want unset (Envoy's 15s)", d)
	}

	// ALPN: h2 added for HTTP/2 and gRPC ports, auto mTLS or ISTIO_MUTUAL.
	for name, want := range map[string][]string{
		"outbound|8080||web.default.svc.cluster.local": {"istio-peer-exchange", "istio"},
		"outbound|7070||web.default.svc.cluster.local": {"istio-peer-exchange", "istio", "h2"},
		"outbound|9090||api.default.svc.cluster.local": {"istio-peer-exchange", "istio", "h2"},
		"outbound|443||ext.example.com":                {"h2"},
	} {
		c := get(name)
		ts := c.GetTransportSocket()
		if m := c.GetTransportSocketMatches(); len(m) > 0 {
			ts = m[0].GetTransportSocket()
		}
		if got := upstreamTLS(t, ts).GetCommonTlsContext().GetAlpnProtocols(); !slices.Equal(got, want) {
			t.Errorf("%s: alpn %v, want %v", name, got, want)
		}
	}

	// Passthrough clusters keep the downstream protocol, 5 minutes idle.
	for _, name := range []string{gen.PassthroughCluster, gen.InboundPassthroughCluster} {
		opts := &httpv3.HttpProtocolOptions{}
		a := get(name).GetTypedExtensionProtocolOptions()[httpProtocolOptionsKey]
		if a == nil || a.UnmarshalTo(opts) != nil || opts.GetUseDownstreamProtocolConfig().GetHttp2ProtocolOptions() == nil ||
			opts.GetCommonHttpProtocolOptions().GetIdleTimeout().AsDuration().Minutes() != 5 {
			t.Errorf("%s: http protocol options %v, want use_downstream_protocol_config, idle_timeout 300s", name, opts)
		}
	}

	// DNS clusters re-resolve every 60s (meshConfig dnsRefreshRate) with
	// 100ms jitter, and as records expire.
	dns := get("outbound|443||dns.example.com")
	//lint:ignore SA1019 checks the deprecated fields istiod sets
	if dns.GetDnsRefreshRate().AsDuration().Seconds() != 60 || dns.GetDnsJitter().AsDuration().Milliseconds() != 100 || !dns.GetRespectDnsTtl() {
		t.Errorf("dns.example.com: dns_refresh_rate %v, dns_jitter %v, respect_dns_ttl %v; want 60s, 0.100s, true",
			//lint:ignore SA1019 as above
			dns.GetDnsRefreshRate(), dns.GetDnsJitter(), dns.GetRespectDnsTtl())
	}

	// A sidecar's cluster of an auto-detected port speaks the protocol
	// the request came in; a gateway's does not sniff.
	for _, tc := range []struct {
		proxy *model.Proxy
		want  bool
	}{{sidecar, true}, {gentest.Node(t, "router~10.0.0.8~gw.default~default.svc.cluster.local", nil), false}} {
		res := gentest.Run(t, Generate, gen.Input{Push: pc, Proxy: tc.proxy, Names: []string{"outbound|9000||web.default.svc.cluster.local"}})
		if len(res) != 1 {
			t.Fatalf("%s: %d clusters, want 1", tc.proxy.ID, len(res))
		}
		opts := &httpv3.HttpProtocolOptions{}
		if a := res[0].Resource.(*clusterv3.Cluster).GetTypedExtensionProtocolOptions()[httpProtocolOptionsKey]; a != nil {
			if err := a.UnmarshalTo(opts); err != nil {
				t.Fatal(err)
			}
		}
		if got := opts.GetUseDownstreamProtocolConfig() != nil; got != tc.want {
			t.Errorf("%s: outbound|9000: use_downstream_protocol_config %v, want %v", tc.proxy.ID, got, tc.want)
		}
	}

	// A proxyless client: no connect_timeout, a bare ADS source, as
	// istiod's grpcgen.
	grpc := gentest.Node(t, "sidecar~10.0.0.9~client.default~default.svc.cluster.local", map[string]string{"GENERATOR": "grpc"})
	res := gentest.Run(t, Generate, gen.Input{Push: pc, Proxy: grpc, Names: []string{"outbound|7070||web.default.svc.cluster.local"}})
	if len(res) != 1 {
		t.Fatalf("proxyless: %d clusters, want 1", len(res))
	}
	c := res[0].Resource.(*clusterv3.Cluster)
	if c.GetConnectTimeout() != nil || c.GetEdsClusterConfig().GetEdsConfig().GetResourceApiVersion() != corev3.ApiVersion_AUTO ||
		c.GetEdsClusterConfig().GetEdsConfig().GetInitialFetchTimeout() != nil || c.GetEdsClusterConfig().GetEdsConfig().GetAds() == nil ||
		c.GetCommonLbConfig() != nil {
		t.Errorf("proxyless %s: connect_timeout %v, eds_config %v, common_lb_config %v; want none, {ads:{}}, none",
			c.GetName(), c.GetConnectTimeout(), c.GetEdsClusterConfig().GetEdsConfig(), c.GetCommonLbConfig())
	}
}

func upstreamTLS(t *testing.T, ts *corev3.TransportSocket) *tlsv3.UpstreamTlsContext {
	t.Helper()
	out := &tlsv3.UpstreamTlsContext{}
	if ts == nil || ts.GetTypedConfig().UnmarshalTo(out) != nil {
		t.Fatalf("transport socket %v: not an UpstreamTlsContext", ts)
	}
	return out
}
