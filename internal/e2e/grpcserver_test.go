package e2e

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/xds"

	"github.com/baremesh/baremesh/core/testkit"
	"github.com/baremesh/baremesh/xdsserver/ads"
)

// TestGRPCGoXDSServer: grpc-go's xDS-enabled server asks baremeshd for
// its inbound listener, gets it, turns SERVING and serves a plain
// client; under grpc-go's default listener name template
// (grpc/server?xds.resource.listening_address=…) and under the one
// Istio's agent writes into a proxyless bootstrap
// (xds.istio.io/grpc/lds/inbound/…), which got no listener before.
func TestGRPCGoXDSServer(t *testing.T) {
	for _, template := range []string{"grpc/server?xds.resource.listening_address=", "xds.istio.io/grpc/lds/inbound/"} {
		t.Run(strings.TrimSuffix(strings.ReplaceAll(template, "/", "_"), "="), func(t *testing.T) { testGRPCGoXDSServer(t, template) })
	}
}

func testGRPCGoXDSServer(t *testing.T, template string) {
	m := startMesh(t, map[string]string{"echo.yaml": echoService(nil, nil)})
	bootstrap := strings.Replace(string(m.bootstrap("sidecar~127.0.0.1~server.default~default.svc.cluster.local")),
		"grpc/server?xds.resource.listening_address=", template, 1)
	var mu sync.Mutex
	var modes []connectivity.ServingMode
	var lastErr error
	srv, err := xds.NewGRPCServer(
		grpc.Creds(insecure.NewCredentials()),
		xds.BootstrapContentsForTesting([]byte(bootstrap)),
		xds.ServingModeCallback(func(addr net.Addr, a xds.ServingModeChangeArgs) {
			mu.Lock()
			modes = append(modes, a.Mode)
			lastErr = a.Err
			mu.Unlock()
		}),
	)
	if err != nil {
		t.Fatal(err)
	}
	healthpb.RegisterHealthServer(srv, health.NewServer())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	testkit.EventuallyWithin(t, e2eWait, "server SERVING", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(modes) > 0 && modes[len(modes)-1] == connectivity.ServingModeServing
	})
	mu.Lock()
	if lastErr != nil {
		t.Fatalf("serving mode error: %v", lastErr)
	}
	mu.Unlock()
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	if _, err := healthpb.NewHealthClient(cc).Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("RPC to the xDS server: %v", err)
	}
	want := template + lis.Addr().String()
	var names []string
	for _, p := range m.d.XDS().Syncz() {
		for _, ty := range p.Types {
			if ty.Type == "lds" && ty.Resources == 1 {
				names = append(names, p.ID)
			}
		}
	}
	if len(names) == 0 {
		t.Fatalf("syncz shows no LDS sent to the server (want %s)", want)
	}
}

// TestNACKIsNotResent: a config grpc-go rejects is NACKed, shown on
// syncz with grpc-go's reason, and not sent again while the rest of the
// config keeps changing.
func TestNACKIsNotResent(t *testing.T) {
	bs := map[string]*backend{"a1": startBackend(t, "a1"), "b1": startBackend(t, "b1")}
	versions := map[string]string{"a1": "v1", "b1": "v2"}
	m := startMesh(t, map[string]string{"echo.yaml": echoService(bs, versions), "vs.yaml": routes(100, 0, "")})
	cc := m.xdsClient(t, "nack")
	ctx := context.Background()
	testkit.EventuallyWithin(t, e2eWait, "first RPC", func() bool { _, err := call(ctx, cc); return err == nil })

	// Valid Istio config that grpc-go refuses: the same VM registered
	// twice (two WorkloadEntries, one address and port) makes EDS hold a
	// duplicate endpoint, which grpc-go NACKs.
	dup := map[string]*backend{"a1": bs["a1"], "a1-again": bs["a1"], "b1": bs["b1"]}
	m.write("echo.yaml", echoService(dup, map[string]string{"a1": "v1", "a1-again": "v1", "b1": "v2"}))
	var cds ads.SyncStatus
	testkit.EventuallyWithin(t, e2eWait, "EDS NACK on syncz", func() bool {
		cds = typeStatus(m, "nack", "eds")
		return cds.LastNack != nil
	})
	if !strings.Contains(cds.LastNack.Message, "duplicate endpoint") {
		t.Fatalf("NACK message = %q", cds.LastNack.Message)
	}
	// Keep changing other config (routes of v2, which grpc-go still has)
	// while the rejected EDS stays rejected.
	for i := 0; i < 6; i++ {
		if i%2 == 0 {
			m.write("vs.yaml", routes(0, 100, ""))
			allTo(t, ctx, cc, "b1")
			continue
		}
		m.write("vs.yaml", routes(0, 100, "    fault: {abort: {httpStatus: 403, percentage: {value: 100}}}\n"))
		testkit.EventuallyWithin(t, e2eWait, "fault abort with PERMISSION_DENIED", func() bool {
			_, err := call(ctx, cc)
			return status.Code(err) == codes.PermissionDenied
		})
	}
	after := typeStatus(m, "nack", "eds")
	t.Logf("EDS at the NACK: nonce %s, %d requests, %d ACKs, %d NACKs; after 6 more changes: nonce %s, %d requests, %d ACKs, %d NACKs",
		cds.SentNonce, cds.Requests, cds.Acks, cds.Nacks, after.SentNonce, after.Requests, after.Acks, after.Nacks)
	// The rejected content is never sent again (it would be NACKed again),
	// and the client's EDS traffic stays bounded: no resend loop.
	if after.Nacks != cds.Nacks {
		t.Fatalf("EDS NACKs went from %d to %d: the rejected config was sent again", cds.Nacks, after.Nacks)
	}
	if sent := after.Requests + after.Acks + after.Nacks - (cds.Requests + cds.Acks + cds.Nacks); sent > 6 {
		t.Fatalf("client sent %d EDS messages during 6 unrelated changes; a resend loop?", sent)
	}
	// Fixing the config clears the rejection (the client still holds the
	// good version from before, so there is nothing to resend) and v1
	// serves again.
	m.write("echo.yaml", echoService(bs, versions))
	testkit.EventuallyWithin(t, e2eWait, "NACK cleared once the config no longer holds the rejected endpoints", func() bool {
		return typeStatus(m, "nack", "eds").LastNack == nil
	})
	m.write("vs.yaml", routes(100, 0, ""))
	allTo(t, ctx, cc, "a1")
}

func typeStatus(m *mesh, proxy, typ string) ads.SyncStatus {
	for _, p := range m.d.XDS().Syncz() {
		if !strings.Contains(p.ID, "~"+proxy+".") {
			continue
		}
		for _, s := range p.Types {
			if s.Type == typ {
				return s
			}
		}
	}
	return ads.SyncStatus{}
}
