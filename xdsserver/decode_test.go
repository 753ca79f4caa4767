package xdsserver

import (
	"slices"
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
		ResourceNames: []string{"outbound|80|v1|a.mesh", "outbound|80||a.mesh", "*"},
		Node:          &corev3.Node{Id: "sidecar~1.2.3.4~a.ns~ns.svc.cluster.local", Metadata: &structpb.Struct{Fields: map[string]*structpb.Value{"GENERATOR": structpb.NewStringValue("grpc")}}},
		ErrorDetail:   &statuspb.Status{Code: 3, Message: "no"},
	}
	b, _ := proto.Marshal(seed)
	f.Add(b)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		var want discovery.DiscoveryRequest
		wantErr := proto.Unmarshal(b, &want)
		var got sotwRequest
		gotErr := decodeRequest(mem.BufferSlice{mem.SliceBuffer(b)}, &got)
		if (wantErr == nil) != (gotErr == nil) {
			t.Fatalf("proto err %v, decodeRequest err %v", wantErr, gotErr)
		}
		if wantErr != nil {
			return
		}
		// The summary is taken while decoding; names are split out later.
		sum := sotwRequest{DiscoveryRequest: discovery.DiscoveryRequest{ResourceNames: want.ResourceNames}}
		sum.summarise()
		if got.nNames != sum.nNames || got.namesSum != sum.namesSum || got.star != sum.star {
			t.Fatalf("summary n=%d sum=%x star=%v, want n=%d sum=%x star=%v", got.nNames, got.namesSum, got.star, sum.nNames, sum.namesSum, sum.star)
		}
		got.ResourceNames = got.names()
		if !proto.Equal(&want, &got.DiscoveryRequest) {
			t.Fatalf("decodeRequest = %v, want %v", &got.DiscoveryRequest, &want)
		}
		// Resolved and released, the request keeps its strings though its
		// buffer is reused.
		rs := resolver{shared: &lists{}}
		rs.resolve(&got)
		scribble := requestPool.Get(len(b)) // likely the buffer just released
		for i := range *scribble {
			(*scribble)[i] = 0xff
		}
		defer requestPool.Put(scribble)
		wantNames := slices.Sorted(slices.Values(want.ResourceNames))
		if sum.star || len(wantNames) == 0 {
			wantNames = nil
		}
		var gotNames []string
		if got.list != nil {
			gotNames = got.list.names
		}
		if !slices.Equal(gotNames, wantNames) || got.VersionInfo != want.VersionInfo || got.TypeUrl != want.TypeUrl || got.ResponseNonce != want.ResponseNonce {
			t.Fatalf("resolved: names %q version %q type %q nonce %q; want %q %q %q %q",
				gotNames, got.VersionInfo, got.TypeUrl, got.ResponseNonce, wantNames, want.VersionInfo, want.TypeUrl, want.ResponseNonce)
		}
	})
}
