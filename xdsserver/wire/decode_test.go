package wire

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
		// Names are checked for UTF-8 when resolved, not when decoded.
		var got Request
		gotErr := decodeRequest(mem.BufferSlice{mem.SliceBuffer(b)}, &got)
		var names []string
		if gotErr == nil {
			names, gotErr = got.names()
		}
		if (wantErr == nil) != (gotErr == nil) {
			t.Fatalf("proto err %v, decodeRequest err %v", wantErr, gotErr)
		}
		if wantErr != nil {
			return
		}
		if got.nNames != len(want.ResourceNames) || got.star != slices.Contains(want.ResourceNames, "*") {
			t.Fatalf("summary n=%d star=%v, want the names of %q", got.nNames, got.star, want.ResourceNames)
		}
		got.ResourceNames = names
		if !proto.Equal(&want, &got.DiscoveryRequest) {
			t.Fatalf("decodeRequest = %v, want %v", &got.DiscoveryRequest, &want)
		}
		// Resolved and released, the request keeps its strings though its
		// buffer is reused.
		shared := &Lists{}
		rs := Resolver{Shared: shared}
		if err := rs.Resolve(&got); err != nil {
			t.Fatal(err)
		}
		// Another stream sending the same bytes shares the list.
		var again Request
		if err := decodeRequest(mem.BufferSlice{mem.SliceBuffer(b)}, &again); err != nil {
			t.Fatal(err)
		}
		if err := (&Resolver{Shared: shared}).Resolve(&again); err != nil || again.List != got.List {
			t.Fatalf("the same names resolved again: list %p (err %v), want %p", again.List, err, got.List)
		}
		scribble := requestPool.Get(len(b)) // likely the buffer just released
		for i := range *scribble {
			(*scribble)[i] = 0xff
		}
		defer requestPool.Put(scribble)
		wantNames := slices.Sorted(slices.Values(want.ResourceNames))
		if slices.Contains(wantNames, "*") || len(wantNames) == 0 {
			wantNames = nil
		}
		var gotNames []string
		if got.List != nil {
			gotNames = got.List.Names
		}
		if !slices.Equal(gotNames, wantNames) || got.VersionInfo != want.VersionInfo || got.TypeUrl != want.TypeUrl || got.ResponseNonce != want.ResponseNonce {
			t.Fatalf("resolved: names %q version %q type %q nonce %q; want %q %q %q %q",
				gotNames, got.VersionInfo, got.TypeUrl, got.ResponseNonce, wantNames, want.VersionInfo, want.TypeUrl, want.ResponseNonce)
		}
	})
}

func FuzzDecodeDeltaRequest(f *testing.F) {
	seed := &discovery.DeltaDiscoveryRequest{
		TypeUrl: "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment", ResponseNonce: "4",
		ResourceNamesSubscribe:   []string{"outbound|80|v1|a.mesh", "outbound|80||a.mesh", "*"},
		ResourceNamesUnsubscribe: []string{"outbound|80||b.mesh"},
		Node:                     &corev3.Node{Id: "sidecar~1.2.3.4~a.ns~ns.svc.cluster.local"},
		ErrorDetail:              &statuspb.Status{Code: 3, Message: "no"},
	}
	b, _ := proto.Marshal(seed)
	f.Add(b)
	seed.InitialResourceVersions = map[string]string{"a": "1"}
	b, _ = proto.Marshal(seed)
	f.Add(b)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		var want discovery.DeltaDiscoveryRequest
		wantErr := proto.Unmarshal(b, &want)
		var got discovery.DeltaDiscoveryRequest
		gotErr := decodeDeltaRequest(mem.BufferSlice{mem.SliceBuffer(b)}, &got)
		if (wantErr == nil) != (gotErr == nil) {
			t.Fatalf("proto err %v, decodeDeltaRequest err %v", wantErr, gotErr)
		}
		scribble := requestPool.Get(len(b)) // likely the buffer just released
		for i := range *scribble {
			(*scribble)[i] = 0xff
		}
		defer requestPool.Put(scribble)
		if wantErr == nil && !proto.Equal(&want, &got) {
			t.Fatalf("decodeDeltaRequest = %v, want %v", &got, &want)
		}
	})
}
