package load

import (
	"errors"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

// TestEncodeRequest: what the codec writes is what proto.Unmarshal
// reads as the request the old client built with the generated types.
func TestEncodeRequest(t *testing.T) {
	node := &corev3.Node{Id: "sidecar~10.0.0.1~a.default~default.svc.cluster.local", Cluster: "a.default"}
	nodeWire := marshal(t, node)
	names := newNameList([]string{"a", "b", "outbound|80||c.load.mesh"})
	bad := errors.New("duplicate resource name\nx")
	nack := &statuspb.Status{Code: int32(codes.InvalidArgument), Message: bad.Error()}
	cases := []struct {
		name string
		in   any
		want proto.Message
	}{
		{"empty sotw", &sotwRequest{}, &discovery.DiscoveryRequest{}},
		{"first sotw", &sotwRequest{node: nodeWire, typeURL: Cluster.URL()},
			&discovery.DiscoveryRequest{Node: node, TypeUrl: Cluster.URL()}},
		{"sotw ack", &sotwRequest{version: "7", typeURL: Endpoint.URL(), nonce: "n", names: names},
			&discovery.DiscoveryRequest{VersionInfo: "7", TypeUrl: Endpoint.URL(), ResponseNonce: "n", ResourceNames: names.list()}},
		{"sotw nack", &sotwRequest{version: "6", typeURL: Endpoint.URL(), nonce: "n", names: names, err: bad},
			&discovery.DiscoveryRequest{VersionInfo: "6", TypeUrl: Endpoint.URL(), ResponseNonce: "n", ResourceNames: names.list(), ErrorDetail: nack}},
		{"empty delta", &deltaRequest{}, &discovery.DeltaDiscoveryRequest{}},
		{"first delta", &deltaRequest{node: nodeWire, typeURL: Cluster.URL(), subscribe: wildcardNames, initial: map[string]string{"a": "1", "b": ""}},
			&discovery.DeltaDiscoveryRequest{Node: node, TypeUrl: Cluster.URL(), ResourceNamesSubscribe: []string{"*"}, InitialResourceVersions: map[string]string{"a": "1", "b": ""}}},
		{"delta subscription", &deltaRequest{typeURL: Route.URL(), subscribe: names, unsubscribe: newNameList([]string{"x", "y"})},
			&discovery.DeltaDiscoveryRequest{TypeUrl: Route.URL(), ResourceNamesSubscribe: names.list(), ResourceNamesUnsubscribe: []string{"x", "y"}}},
		{"delta ack", &deltaRequest{typeURL: Route.URL(), nonce: "n"}, &discovery.DeltaDiscoveryRequest{TypeUrl: Route.URL(), ResponseNonce: "n"}},
		{"delta nack", &deltaRequest{typeURL: Route.URL(), nonce: "n", err: bad},
			&discovery.DeltaDiscoveryRequest{TypeUrl: Route.URL(), ResponseNonce: "n", ErrorDetail: nack}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			data, err := clientCodec.Marshal(c.in)
			if err != nil {
				t.Fatal(err)
			}
			got := c.want.ProtoReflect().New().Interface()
			if err := proto.Unmarshal(data.Materialize(), got); err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(c.want, got) {
				t.Errorf("got %v, want %v", got, c.want)
			}
		})
	}
	// Other messages go to grpc's proto codec.
	data, err := clientCodec.Marshal(&discovery.DiscoveryRequest{TypeUrl: "x"})
	if err != nil {
		t.Fatal(err)
	}
	var back discovery.DiscoveryRequest
	if err := proto.Unmarshal(data.Materialize(), &back); err != nil || back.GetTypeUrl() != "x" {
		t.Fatalf("fallback: %v %v", err, &back)
	}
}

// TestNameListShared: the encoding of a shared list is computed once.
func TestNameListShared(t *testing.T) {
	l := newNameList([]string{"a", "b"})
	if e1, e2 := l.encoded(), l.encoded(); &e1[0] != &e2[0] {
		t.Error("encoded twice")
	}
	if newNameList(nil) != nil || (*nameList)(nil).encoded() != nil || !(*nameList)(nil).equal(newNameList([]string{})) {
		t.Error("the empty list")
	}
}
