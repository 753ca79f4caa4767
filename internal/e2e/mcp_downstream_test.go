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
	m := startMesh(t, map[string]string{"echo.yaml": echoService(bs, versions), "vs.yaml": routes(0, 100, "")})
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
	// endpoint-only change: it keeps baremesh's snapshot, so it reaches
	// istiod with the next full push (here a VirtualService edit), not at
	// once (see the mcp note).
	bs["a2"] = startBackend(t, "a2")
	versions["a2"] = "v1"
	m.write("echo.yaml", echoService(bs, versions))
	m.write("vs.yaml", routes(100, 0, "    timeout: 5s\n"))
	testkit.EventuallyWithin(t, e2eWait, "the added WorkloadEntry to receive traffic through istiod", func() bool {
		for i := 0; i < 20; i++ {
			if b, err := call(ctx, cc); err == nil && b == "a2" {
				return true
			}
		}
		return false
	})
}
