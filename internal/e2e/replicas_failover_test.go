package e2e

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/baremesh/baremesh/core/testkit"
)

// registerStream opens an ADS stream to m for a proxy at ip in group vm
// (plaintext; the replicas allow unauthenticated registration) and waits
// for the first response. Cancel ctx to end it.
func registerStream(ctx context.Context, cc *grpc.ClientConn, ip string) error {
	s, err := discovery.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(ctx)
	if err != nil {
		return err
	}
	md, _ := structpb.NewStruct(map[string]any{"AUTO_REGISTER_GROUP": "vm", "GENERATOR": "grpc"})
	node := &corev3.Node{Id: "sidecar~" + ip + "~vm-" + strings.ReplaceAll(ip, ".", "-") + ".default~default.svc.cluster.local", Metadata: md}
	if err := s.Send(&discovery.DiscoveryRequest{Node: node, TypeUrl: "type.googleapis.com/envoy.config.listener.v3.Listener", ResourceNames: []string{"echo.mesh:7070"}}); err != nil {
		return err
	}
	_, err = s.Recv()
	return err
}

// TestReplicaFailover500 (BAREMESH_FAILOVER_PROXIES=N, default off): N
// proxies spread over three replicas, the one holding a third of them
// crashes (no leave) and its proxies reconnect to the survivors at once.
// Reports the entries missing on a survivor at any poll and the time until
// every entry is owned by a live replica.
func TestReplicaFailover500(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("BAREMESH_FAILOVER_PROXIES"))
	if n <= 0 {
		t.Skip("set BAREMESH_FAILOVER_PROXIES (e.g. 500) to measure")
	}
	static, vm := startBackend(t, "static"), startBackend(t, "vm")
	files := vmFiles(static, vm)
	a := startReplica(t, "cp-a", files)
	seed := clusterz(t, a).Addr
	b := startReplica(t, "cp-b", files, seed)
	c := startReplica(t, "cp-c", files, seed)
	for _, m := range []*mesh{a, b, c} {
		testkit.EventuallyWithin(t, e2eWait, "three members", func() bool { return len(clusterz(t, m).Members) == 3 })
	}
	conn := func(m *mesh) *grpc.ClientConn {
		cc, err := grpc.NewClient(m.d.XDSAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		return cc
	}
	ccs := []*grpc.ClientConn{conn(a), conn(b), conn(c)}
	ip := func(i int) string { return fmt.Sprintf("10.9.%d.%d", (i+1)>>8, (i+1)&255) }
	errs := make(chan error, n)
	for i := range n {
		go func() { errs <- registerStream(t.Context(), ccs[i%3], ip(i)) }()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	registered := time.Now()
	for _, m := range []*mesh{b, c} {
		// memberlist's LAN defaults: broadcasts carry a few records per
		// 200 ms gossip round, push-pull the whole table every 30 s.
		testkit.EventuallyWithin(t, 90*time.Second, "all registered on a survivor", func() bool { return len(registrations(t, m)) == n })
	}
	t.Logf("%d registrations on every replica %v after the last stream's first response", n, time.Since(registered).Round(time.Millisecond))
	// cp-a crashes; its proxies reconnect to b and c at once.
	if err := a.d.Cluster().Shutdown(false); err != nil {
		t.Fatal(err)
	}
	crashed := time.Now()
	a.stop()
	for i := 0; i < n; i += 3 {
		go func() { errs <- registerStream(t.Context(), ccs[1+(i/3)%2], ip(i)) }()
	}
	moved := 0
	for i := 0; i < n; i += 3 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
		moved++
	}
	minSeen := n
	var reowned time.Duration
	testkit.EventuallyWithin(t, 90*time.Second, "every entry owned by a live replica on both survivors", func() bool {
		ok := true
		for _, m := range []*mesh{b, c} {
			regs := registrations(t, m)
			minSeen = min(minSeen, len(regs))
			for _, r := range regs {
				if r["owner"] == "cp-a" {
					ok = false
				}
			}
			ok = ok && len(regs) == n
		}
		reowned = time.Since(crashed)
		return ok
	})
	t.Logf("%d proxies, %d moved from the crashed replica: fewest entries seen on a survivor %d (lost %d); all owned by live replicas after %v",
		n, moved, minSeen, n-minSeen, reowned.Round(time.Millisecond))
	if minSeen != n {
		t.Fatalf("entries lost: %d", n-minSeen)
	}
}
