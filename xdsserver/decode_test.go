package xdsserver

import (
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

func FuzzDecodeRequest(f *testing.F) {
	seed := &discovery.DiscoveryRequest{
		VersionInfo: "3-4", TypeUrl: "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment", ResponseNonce: "4",
		ResourceNames: []string{"outbound|80||a.mesh", "outbound|80|v1|a.mesh"},
		Node:          &corev3.Node{Id: "sidecar~1.2.3.4~a.ns~ns.svc.cluster.local", Metadata: &structpb.Struct{Fields: map[string]*structpb.Value{"GENERATOR": structpb.NewStringValue("grpc")}}},
		ErrorDetail:   &statuspb.Status{Code: 3, Message: "no"},
	}
	b, _ := proto.Marshal(seed)
	f.Add(b)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		var want discovery.DiscoveryRequest
		wantErr := proto.Unmarshal(b, &want)
		var got discovery.DiscoveryRequest
		gotErr := decodeRequest(mem.BufferSlice{mem.SliceBuffer(b)}, &got)
		if (wantErr == nil) != (gotErr == nil) {
			t.Fatalf("proto err %v, decodeRequest err %v", wantErr, gotErr)
		}
		if wantErr == nil && !proto.Equal(&want, &got) {
			t.Fatalf("decodeRequest = %v, want %v", &got, &want)
		}
	})
}
