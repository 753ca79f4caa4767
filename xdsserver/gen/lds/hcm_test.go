package lds

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/proto"
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
		want, err := proto.Marshal(hcmRDS(tc[0], tc[1]))
		if err != nil {
			t.Fatal(err)
		}
		f := rdsFilter(tc[0], tc[1])
		if got := f.GetTypedConfig().GetValue(); !bytes.Equal(got, want) {
			t.Errorf("rdsFilter(%q, %q):\n got %x\nwant %x", tc[0], tc[1], got, want)
		}
		if ref := hcmFilter(hcmRDS(tc[0], tc[1])); !proto.Equal(f, ref) {
			t.Errorf("rdsFilter(%q, %q) = %v, want %v", tc[0], tc[1], f, ref)
		}
	}
}
