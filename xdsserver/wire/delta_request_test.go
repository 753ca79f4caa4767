package wire

import (
	"fmt"
	"slices"
	"testing"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
)

func decodeShared(t *testing.T, lists *Lists, m *discovery.DeltaDiscoveryRequest) *DeltaRequest {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	r := &DeltaRequest{Shared: lists}
	if err := (codec{}).Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, r); err != nil {
		t.Fatal(err)
	}
	return r
}

// A long subscription becomes one shared list, whatever the order the
// names came in and however often one repeats; a short one, or one
// holding "*", stays as sent.
func TestDeltaRequestSharesLongSubscriptions(t *testing.T) {
	var names []string
	for i := range 100 {
		names = append(names, fmt.Sprintf("outbound|80||svc-%03d.example", i))
	}
	reversed := slices.Clone(names)
	slices.Reverse(reversed)
	var lists Lists

	a := decodeShared(t, &lists, &discovery.DeltaDiscoveryRequest{TypeUrl: "t", ResourceNamesSubscribe: reversed})
	b := decodeShared(t, &lists, &discovery.DeltaDiscoveryRequest{TypeUrl: "t", ResourceNamesSubscribe: append(slices.Clone(names), names[7]),
		InitialResourceVersions: map[string]string{names[0]: "1"}}) // decoded by the proto runtime
	if a.Subscribed == nil || a.Subscribed != b.Subscribed {
		t.Fatalf("the same names made lists %p and %p, want one shared list", a.Subscribed, b.Subscribed)
	}
	if a.ResourceNamesSubscribe != nil || !slices.Equal(a.Subscribe(), names) {
		t.Fatalf("shared subscription %v (as sent: %v), want the names sorted, each once", a.Subscribe(), a.ResourceNamesSubscribe)
	}
	if b.GetInitialResourceVersions()[names[0]] != "1" || b.GetTypeUrl() != "t" {
		t.Fatalf("other fields lost: %v", &b.DeltaDiscoveryRequest)
	}

	short := decodeShared(t, &lists, &discovery.DeltaDiscoveryRequest{ResourceNamesSubscribe: []string{"b", "a"}})
	star := decodeShared(t, &lists, &discovery.DeltaDiscoveryRequest{ResourceNamesSubscribe: append([]string{"*"}, reversed...)})
	for _, r := range []*DeltaRequest{short, star} {
		if r.Subscribed != nil || r.Subscribe()[0] != r.ResourceNamesSubscribe[0] {
			t.Fatalf("%v: shared %v, want the names as sent", r.ResourceNamesSubscribe[:2], r.Subscribed)
		}
	}
	if short.Subscribe()[0] != "b" || star.Subscribe()[0] != "*" {
		t.Fatalf("order changed: %v, %v", short.Subscribe()[:2], star.Subscribe()[:2])
	}
}
