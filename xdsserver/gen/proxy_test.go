package gen

import (
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/structpb"
)

// TestParseNodeDNSAutoAllocate: DNS_CAPTURE true (as Istio's StringBool
// reads it) asks for allocated service addresses, whatever
// DNS_AUTO_ALLOCATE says (istiod 1.31: PILOT_ENABLE_IP_AUTOALLOCATE is on
// by default).
func TestParseNodeDNSAutoAllocate(t *testing.T) {
	for _, tc := range []struct {
		md   map[string]*structpb.Value
		want bool
	}{
		{nil, false},
		{map[string]*structpb.Value{"DNS_CAPTURE": structpb.NewStringValue("true")}, true},
		{map[string]*structpb.Value{"DNS_AUTO_ALLOCATE": structpb.NewStringValue("true")}, false},
		{map[string]*structpb.Value{"DNS_CAPTURE": structpb.NewStringValue("true"), "DNS_AUTO_ALLOCATE": structpb.NewStringValue("false")}, true},
		{map[string]*structpb.Value{"DNS_CAPTURE": structpb.NewStringValue("true"), "DNS_AUTO_ALLOCATE": structpb.NewStringValue("true")}, true},
		{map[string]*structpb.Value{"DNS_CAPTURE": structpb.NewStringValue("1"), "DNS_AUTO_ALLOCATE": structpb.NewStringValue("True")}, true},
		{map[string]*structpb.Value{"DNS_CAPTURE": structpb.NewStringValue("yes"), "DNS_AUTO_ALLOCATE": structpb.NewStringValue("true")}, false},
		// Istio's node metadata takes these as strings only.
		{map[string]*structpb.Value{"DNS_CAPTURE": structpb.NewBoolValue(true), "DNS_AUTO_ALLOCATE": structpb.NewBoolValue(true)}, false},
	} {
		p, err := ParseNode(&corev3.Node{Id: "sidecar~10.0.0.1~a.ns~ns.svc.cluster.local", Metadata: &structpb.Struct{Fields: tc.md}})
		if err != nil {
			t.Fatal(err)
		}
		if p.DNSAutoAllocate != tc.want {
			t.Errorf("metadata %v: DNSAutoAllocate = %v, want %v", tc.md, p.DNSAutoAllocate, tc.want)
		}
	}
}
