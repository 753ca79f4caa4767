package ads

import (
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/core/push"
	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/xdstype"
)

// TestNodeMustMatchItsIdentity (issue #31 item 1): the server itself
// refuses an authenticated stream whose node claims another namespace or
// another SERVICE_ACCOUNT than its identity (PermissionDenied naming
// both), before the connect hook or a generator sees it, with hooks that
// check nothing; a node that matches, and an unauthenticated one, are
// served. Real grpc-go client and server.
func TestNodeMustMatchItsIdentity(t *testing.T) {
	var connected atomic.Int64
	snaps := &fixedSnaps{}
	snaps.pc.Store(&push.PushContext{Version: 1})
	srv := New(snaps, Options{NoCache: true, Types: typesWith(map[*xdstype.Type]gen.Generator{xdstype.Listener: func(gen.Input) ([]gen.Resource, error) {
		return []gen.Resource{{Name: "l", Resource: &listenerv3.Listener{Name: "l"}}}, nil
	}}), Hooks: Hooks{
		// The caller's namespace and service account come from its
		// metadata: a stand-in for a certificate, so that one server
		// sees several identities.
		Authenticate: func(ctx context.Context) (*model.Identity, error) {
			md, _ := metadata.FromIncomingContext(ctx)
			if len(md.Get("ns")) == 0 {
				return nil, nil
			}
			return &model.Identity{TrustDomain: "cluster.local", Namespace: md.Get("ns")[0], ServiceAccount: md.Get("sa")[0], Method: "test"}, nil
		},
		OnConnect: func(context.Context, *model.Proxy, net.Addr, *model.Identity) error {
			connected.Add(1)
			return nil
		},
	}})
	client := serveForTest(t, srv)
	open := func(ns, sa, nodeNS, nodeSA string) error {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		if ns != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, "ns", ns, "sa", sa)
		}
		st, err := client.StreamAggregatedResources(ctx)
		if err != nil {
			return err
		}
		node := &corev3.Node{Id: "sidecar~10.0.0.1~vm1." + nodeNS + "~" + nodeNS + ".svc.cluster.local"}
		if nodeSA != "" {
			node.Metadata = &structpb.Struct{Fields: map[string]*structpb.Value{"SERVICE_ACCOUNT": structpb.NewStringValue(nodeSA)}}
		}
		if err := st.Send(&discovery.DiscoveryRequest{Node: node, TypeUrl: xdstype.Listener.URL}); err != nil {
			return err
		}
		_, err = st.Recv()
		return err
	}
	for _, c := range []struct {
		name                   string
		ns, sa, nodeNS, nodeSA string
		refused                []string // words the refusal names
	}{
		{name: "same namespace", ns: "shop", sa: "cart", nodeNS: "shop"},
		{name: "same namespace and service account", ns: "shop", sa: "cart", nodeNS: "shop", nodeSA: "cart"},
		{name: "unauthenticated claims what it likes", nodeNS: "shop", nodeSA: "cart"},
		{name: "other namespace", ns: "shop", sa: "cart", nodeNS: "bank", refused: []string{`namespace "bank"`, "spiffe://cluster.local/ns/shop/sa/cart"}},
		{name: "other service account", ns: "shop", sa: "cart", nodeNS: "shop", nodeSA: "vault", refused: []string{`service account "vault"`, "spiffe://cluster.local/ns/shop/sa/cart"}},
	} {
		before := connected.Load()
		err := open(c.ns, c.sa, c.nodeNS, c.nodeSA)
		if c.refused == nil {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
			continue
		}
		if status.Code(err) != codes.PermissionDenied {
			t.Errorf("%s: stream ended with %v, want PermissionDenied", c.name, err)
			continue
		}
		for _, w := range c.refused {
			if !strings.Contains(status.Convert(err).Message(), w) {
				t.Errorf("%s: refusal %q does not name %s", c.name, status.Convert(err).Message(), w)
			}
		}
		if connected.Load() != before {
			t.Errorf("%s: the connect hook saw a refused proxy", c.name)
		}
	}
}
