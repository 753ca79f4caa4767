package load

import (
	"context"
	"net"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	server "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/anypb"
)

// TestReferenceServer checks both modes of the client against
// go-control-plane's own server, an independent implementation of SotW
// and Delta ADS: configuration, an endpoint change, a removed cluster
// (Delta's removed_resources), and a reconnect (Delta's
// initial_resource_versions) after the server restarts on its address.
func TestReferenceServer(t *testing.T) {
	for _, mode := range []Mode{SotW, Delta} {
		t.Run(string(mode), func(t *testing.T) { testReference(t, mode) })
	}
}

type oneHash struct{}

func (oneHash) ID(*corev3.Node) string { return "all" }

func testReference(t *testing.T, mode Mode) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	snaps := cache.NewSnapshotCache(true, oneHash{}, nil)
	set := func(version string, eps map[string]string) {
		t.Helper()
		s, err := cache.NewSnapshot(version, refResources(eps))
		if err != nil {
			t.Fatal(err)
		}
		if err := snaps.SetSnapshot(ctx, "all", s); err != nil {
			t.Fatal(err)
		}
	}
	eps := map[string]string{"a": "10.0.0.1", "b": "10.0.0.2", "c": "10.0.0.3"}
	set("1", eps)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	serve := func(lis net.Listener) *grpc.Server {
		g := grpc.NewServer()
		discovery.RegisterAggregatedDiscoveryServiceServer(g, server.NewServer(ctx, snaps, nil))
		go func() { _ = g.Serve(lis) }()
		return g
	}
	g := serve(lis)
	defer func() { g.Stop() }()

	f, err := Start(ctx, Options{Addr: addr, Proxies: 10, Mode: mode, StreamsPerConn: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Stop()
	if _, err := f.WaitConfigured(ctx); err != nil {
		t.Fatal(err)
	}
	if v := f.View(3); v.Set(Cluster).Len() != 3 || v.Set(Endpoint).Len() != 3 || v.Route("r80") == nil {
		t.Fatalf("clusters %v endpoints %v routes %v", v.Set(Cluster).Names(), v.Set(Endpoint).Names(), v.Set(Route).Names())
	}
	wait := func(what string, p Predicate, change func()) {
		t.Helper()
		w := f.Expect(p)
		change()
		if err := w.Wait(ctx); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	eps["a"] = "10.9.9.9"
	wait("endpoint change", HasEndpoint("a", "10.9.9.9"), func() { set("2", eps) })
	delete(eps, "c")
	wait("removed cluster", func(v View) bool {
		return v.Cluster("c") == nil && v.Endpoints("c") == nil && v.Set(Cluster).Len() == 2 && v.Cluster("a") != nil
	}, func() { set("3", eps) })

	// The server goes away and comes back on the same address with a
	// new endpoint; the proxies reconnect and converge.
	g.Stop()
	eps["b"] = "10.8.8.8"
	set("4", eps)
	lis, err = net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("cannot listen on %s again: %v", addr, err)
	}
	wait("after reconnect", All(HasEndpoint("b", "10.8.8.8"), HasEndpoint("a", "10.9.9.9"), View.Configured), func() { g = serve(lis) })
	tot := f.Totals()
	if tot.Nacks != 0 || tot.Reconnects < 10 {
		t.Errorf("nacks %d reconnects %d, want 0 and >= 10", tot.Nacks, tot.Reconnects)
	}
}

// refResources is a small Envoy config: an EDS cluster, its endpoints
// and a route per entry of eps, and one listener whose
// HttpConnectionManager takes route "r80" from RDS.
func refResources(eps map[string]string) map[resource.Type][]types.Resource {
	ads := &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}, ResourceApiVersion: corev3.ApiVersion_V3}
	out := map[resource.Type][]types.Resource{}
	rc := &routev3.RouteConfiguration{Name: "r80"}
	for name, ip := range eps {
		out[resource.ClusterType] = append(out[resource.ClusterType], &clusterv3.Cluster{
			Name: name, ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
			EdsClusterConfig: &clusterv3.Cluster_EdsClusterConfig{EdsConfig: ads},
		})
		out[resource.EndpointType] = append(out[resource.EndpointType], &endpointv3.ClusterLoadAssignment{
			ClusterName: name,
			Endpoints: []*endpointv3.LocalityLbEndpoints{{LbEndpoints: []*endpointv3.LbEndpoint{{
				HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{Address: &corev3.Address{
					Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
						Address: ip, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 80},
					}},
				}}},
			}}}},
		})
		rc.VirtualHosts = append(rc.VirtualHosts, &routev3.VirtualHost{Name: name, Domains: []string{name + ".example"}})
	}
	out[resource.RouteType] = []types.Resource{rc}
	hcm, _ := anypb.New(&hcmv3.HttpConnectionManager{
		StatPrefix:     "http",
		RouteSpecifier: &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{RouteConfigName: "r80", ConfigSource: ads}},
	})
	out[resource.ListenerType] = []types.Resource{&listenerv3.Listener{
		Name: "0.0.0.0_80",
		FilterChains: []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{{
			Name: "envoy.filters.network.http_connection_manager", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: hcm},
		}}}},
	}}
	return out
}
