package lds

import (
	"bytes"
	"testing"

	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/proto"
	meshv1alpha1 "istio.io/api/mesh/v1alpha1"
)

// TestRDSFilterBytes: rdsFilter writes the bytes proto.Marshal writes
// for the connection manager hcmRDS builds.
func TestRDSFilterBytes(t *testing.T) {
	long := string(bytes.Repeat([]byte("r"), 300)) // a two-byte length
	for _, tc := range [][2]string{
		{"outbound_0.0.0.0_443", "https.443.https.gateway-0.gateway"},
		{"outbound_0.0.0.0_80", "http.80"},
		{"", "80"},
		{"stat", ""},
		{"", ""},
		{long, long},
	} {
		for _, o := range []hcmOpts{
			{class: outboundHTTP},
			{class: gatewayHTTP, trustedHops: 2, xfcc: hcmv3.HttpConnectionManager_SANITIZE_SET},
			{class: gatewayHTTP, norm: meshv1alpha1.MeshConfig_ProxyPathNormalization_DECODE_AND_MERGE_SLASHES},
			{class: outboundHTTP, norm: meshv1alpha1.MeshConfig_ProxyPathNormalization_NONE},
		} {
			ref := hcmRDS(tc[0], tc[1])
			o.apply(ref)
			want, err := proto.MarshalOptions{Deterministic: true}.Marshal(ref)
			if err != nil {
				t.Fatal(err)
			}
			f := rdsFilter(o, tc[0], tc[1])
			if got := f.GetTypedConfig().GetValue(); !bytes.Equal(got, want) {
				t.Errorf("rdsFilter(%+v, %q, %q):\n got %x\nwant %x", o, tc[0], tc[1], got, want)
			}
			if !proto.Equal(f, hcmFilter(ref)) {
				t.Errorf("rdsFilter(%+v, %q, %q) = %v, want %v", o, tc[0], tc[1], f, ref)
			}
		}
	}
}
