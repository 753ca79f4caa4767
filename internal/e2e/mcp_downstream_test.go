package e2e

import (
	"context"
	"fmt"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/xds"

	"github.com/baremesh/baremesh/core/testkit"
)

// xdsClientTo is a grpc-go client of xds:///echo.mesh:7070 whose xDS
// server is addr (an istiod).
func xdsClientTo(t *testing.T, addr, pod string) *grpc.ClientConn {
	t.Helper()
	bootstrap := fmt.Sprintf(`{
  "xds_servers": [{"server_uri": %q, "channel_creds": [{"type": "insecure"}], "server_features": ["xds_v3"]}],
  "node": {"id": "sidecar~127.0.0.1~%s.default~default.svc.cluster.local", "metadata": {"GENERATOR": "grpc", "NAMESPACE": "default"}},
  "server_listener_resource_name_template": "grpc/server?xds.resource.listening_address=%%s"
}`, addr, pod)
	res, err := xds.NewXDSResolverWithConfigForTesting([]byte(bootstrap))
	must(t, err)
	cc, err := grpc.NewClient("xds:///echo.mesh:7070", grpc.WithResolvers(res), grpc.WithTransportCredentials(insecure.NewCredentials()))
	must(t, err)
	t.Cleanup(func() { cc.Close() })
	return cc
}

// TestIstiodReadsBaremesh: an istiod whose meshConfig.configSources is
// baremeshd (xds://) serves a grpc-go client whose ServiceEntry,
// DestinationRule, WorkloadEntries and VirtualService exist only in
// baremesh's files; an edit of a file moves the client's traffic through
// istiod.
func TestIstiodReadsBaremesh(t *testing.T) {
	if testing.Short() {
		t.Skip("starts kube-apiserver and istiod")
	}
	bs := map[string]*backend{"a1": startBackend(t, "a1"), "b1": startBackend(t, "b1")}
	versions := map[string]string{"a1": "v1", "b1": "v2"}
	m := startMeshWith(t, map[string]string{"echo.yaml": echoService(bs, versions), "vs.yaml": routes(0, 100, "")}, plaintextMCP)
	ist := startIstiodMesh(t, fmt.Sprintf("configSources:\n- address: xds://%s\n", m.d.XDSAddr()))
	cc := xdsClientTo(t, ist.grpcAddr, "client")
	ctx := context.Background()
	allTo(t, ctx, cc, "b1") // the VirtualService in baremesh's file: all to v2
	m.write("vs.yaml", routes(100, 0, ""))
	allTo(t, ctx, cc, "a1")
	for i := 0; i < 20; i++ {
		if b, err := call(ctx, cc, "x-user", "jason"); err != nil || b != "b1" {
			t.Fatalf("x-user=jason went to %q (%v), want b1", b, err)
		}
	}
	// A WorkloadEntry added in baremesh for the existing ServiceEntry is an
	// endpoint-only change: it reaches istiod at once, with the endpoint
	// push (issue #25: it waited for the next full push, such as a
	// VirtualService edit).
	bs["a2"] = startBackend(t, "a2")
	versions["a2"] = "v1"
	m.write("echo.yaml", echoService(bs, versions))
	reaches := func(what, want string) {
		t.Helper()
		testkit.EventuallyWithin(t, e2eWait, what, func() bool {
			for i := 0; i < 20; i++ {
				if b, err := call(ctx, cc); err == nil && b == want {
					return true
				}
			}
			return false
		})
	}
	reaches("the added WorkloadEntry to receive traffic through istiod", "a2")
	// Its address (here its port) moves: also endpoint-only, also at once.
	bs["a2"] = startBackend(t, "a2-moved")
	m.write("echo.yaml", echoService(bs, versions))
	reaches("the moved WorkloadEntry to receive traffic at its new address through istiod", "a2-moved")
}
