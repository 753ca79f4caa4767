package gen

import (
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/baremesh/baremesh/core/model"
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

// TestParseNodeProxyHeaders: PROXY_CONFIG's proxyHeaders (as Istio's
// agent sends its merged ProxyConfig) are the proxy's; a PROXY_CONFIG
// without them gives Istio's defaults (not the mesh's); no PROXY_CONFIG
// leaves them to the mesh (nil).
func TestParseNodeProxyHeaders(t *testing.T) {
	pc, err := structpb.NewStruct(map[string]any{"proxyHeaders": map[string]any{
		"server": map[string]any{"disabled": true}, "requestId": map[string]any{"disabled": true},
		"forwardedClientCert": "SANITIZE", "setCurrentClientCertDetails": map[string]any{"cert": true},
		"preserveHttp1HeaderCase": true,
	}})
	if err != nil {
		t.Fatal(err)
	}
	parse := func(md map[string]*structpb.Value) *model.ProxyHeaders {
		p, err := ParseNode(&corev3.Node{Id: "sidecar~10.0.0.1~a.ns~ns.svc.cluster.local", Metadata: &structpb.Struct{Fields: md}})
		if err != nil {
			t.Fatal(err)
		}
		return p.ProxyHeaders
	}
	h := parse(map[string]*structpb.Value{"PROXY_CONFIG": structpb.NewStructValue(pc)})
	if h == nil || !h.ServerDisabled || !h.NoRequestID || h.ForwardedClientCert == 0 || !h.HasCertDetails || !h.Cert || !h.Subject || h.Chain || !h.PreserveHTTP1Case {
		t.Errorf("PROXY_CONFIG proxyHeaders: %+v", h)
	}
	if h := parse(map[string]*structpb.Value{"PROXY_CONFIG": structpb.NewStructValue(&structpb.Struct{})}); h == nil || *h != (model.ProxyHeaders{}) {
		t.Errorf("PROXY_CONFIG without proxyHeaders: %+v, want the defaults", h)
	}
	if h := parse(nil); h != nil {
		t.Errorf("no PROXY_CONFIG: %+v, want nil (the mesh's apply)", h)
	}
}
