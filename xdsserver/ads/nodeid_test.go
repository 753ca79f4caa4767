package ads

import (
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/baremesh/baremesh/xdsserver/xdstype"
)

// TestLongNodeIDIsRefused: a node ID over MaxNodeIDLength is refused
// with InvalidArgument naming its size and the bound, without echoing
// it; one at the bound is served.
func TestLongNodeIDIsRefused(t *testing.T) {
	e := newEnv(t)
	s := e.open(t)
	long := "sidecar~10.0.0.1~" + strings.Repeat("a", 64<<10) + ".ns~ns.svc.cluster.local"
	if err := s.st.Send(&discovery.DiscoveryRequest{Node: &corev3.Node{Id: long}, TypeUrl: xdstype.Listener.URL}); err != nil {
		t.Fatal(err)
	}
	if _, ok := <-s.rx; ok {
		t.Fatal("server answered a 64 KiB node ID")
	}
	_, err := s.st.Recv()
	st, _ := status.FromError(err)
	if st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), "bytes refused: at most 1024") || len(st.Message()) > 200 {
		t.Fatalf("err = %v (%d bytes), want InvalidArgument naming the size and the bound", st.Code(), len(st.Message()))
	}

	ok := "sidecar~10.0.0.1~" + strings.Repeat("a", MaxNodeIDLength-len("sidecar~10.0.0.1~.ns~ns.svc.cluster.local")) + ".ns~ns.svc.cluster.local"
	s2 := e.open(t)
	if err := s2.st.Send(&discovery.DiscoveryRequest{Node: &corev3.Node{Id: ok}, TypeUrl: xdstype.Listener.URL}); err != nil {
		t.Fatal(err)
	}
	if r := s2.recv(); r.GetTypeUrl() != xdstype.Listener.URL {
		t.Fatalf("a node ID of %d bytes got %v", len(ok), r)
	}
}
