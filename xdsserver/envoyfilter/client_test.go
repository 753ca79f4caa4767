package envoyfilter_test

import (
	"context"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/baremesh/baremesh/core/push"
	"github.com/baremesh/baremesh/core/store"
	"github.com/baremesh/baremesh/xdsserver/ads"
	"github.com/baremesh/baremesh/xdsserver/wire"
	"github.com/baremesh/baremesh/xdsserver/xdstype"
)

type snaps struct{ pc *push.PushContext }

func (s snaps) Current() *push.PushContext { return s.pc.Pin() }

// lds connects to a real ADS server over gRPC as web's sidecar, asks for
// every listener, ACKs them and returns them by name.
func lds(t *testing.T, srv *ads.Server) map[string]*listenerv3.Listener {
	t.Helper()
	g := grpc.NewServer(wire.GRPCServerOptions()...)
	srv.Register(g)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = g.Serve(lis) }()
	defer g.Stop()
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := discovery.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	node := &corev3.Node{Id: "sidecar~10.0.0.1~web.default~default.svc.cluster.local", Metadata: &structpb.Struct{Fields: map[string]*structpb.Value{
		"ISTIO_VERSION": structpb.NewStringValue("1.31.0"),
		"LABELS":        structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{"app": structpb.NewStringValue("web")}}),
	}}}
	if err := st.Send(&discovery.DiscoveryRequest{Node: node, TypeUrl: xdstype.Listener.URL}); err != nil {
		t.Fatal(err)
	}
	resp, err := st.Recv() // bounded by ctx's deadline
	if err != nil {
		t.Fatalf("LDS: %v", err)
	}
	out := map[string]*listenerv3.Listener{}
	for _, a := range resp.GetResources() {
		l := &listenerv3.Listener{}
		if err := a.UnmarshalTo(l); err != nil {
			t.Fatal(err)
		}
		out[l.GetName()] = l
	}
	if err := st.Send(&discovery.DiscoveryRequest{TypeUrl: xdstype.Listener.URL, VersionInfo: resp.GetVersionInfo(), ResponseNonce: resp.GetNonce()}); err != nil {
		t.Fatal(err)
	}
	return out
}

// A patched listener reaches a real xDS client through the server's
// generation stage and cache; a patch that would make it invalid is
// skipped there, the rest of the listener arrives, and the problem is
// named by the server's builder.
func TestPatchedListenerOverADS(t *testing.T) {
	pc := buildWorld(t, ef("lua", "istio-system", `
  configPatches:
  - applyTo: HTTP_FILTER
    match:
      context: SIDECAR_OUTBOUND`+routerMatch+`
    patch:
      operation: INSERT_BEFORE
      value:`+lua+`
  - applyTo: LISTENER
    match: {context: SIDECAR_OUTBOUND, listener: {portNumber: 9080}}
    patch: {operation: MERGE, value: {connection_balance_config: {}}}`))
	srv := ads.New(snaps{pc}, ads.Options{CacheAssert: true})
	got := lds(t, srv)
	l, ok := got["0.0.0.0_9080"]
	if !ok {
		t.Fatalf("no 0.0.0.0_9080 among %d listeners", len(got))
	}
	fs := httpFilters(t, l.GetFilterChains()[0])
	if before(fs, "envoy.filters.http.router") != "envoy.filters.http.lua" {
		t.Errorf("received HTTP filters %v: want lua before the router", fs)
	}
	if l.GetConnectionBalanceConfig() != nil {
		t.Error("the invalid patch arrived: an empty connection_balance_config (its balance_type is required)")
	}
	ps := srv.Builder().EnvoyFilterProblems()
	if !slices.ContainsFunc(ps, func(p store.Problem) bool {
		return p.Resource == "EnvoyFilter/istio-system/lua" && strings.Contains(p.Error, "configPatches[1] on 0.0.0.0_9080")
	}) {
		t.Errorf("problems %+v: want configPatches[1] on 0.0.0.0_9080", ps)
	}
}
