package gen

import (
	"testing"

	"github.com/baremesh/baremesh/core/model"
)

// TestIstioAtLeast reads ISTIO_VERSION as istiod's ParseIstioVersion: a
// "release-" prefix, suffixes after major.minor, and a proxy without a
// version it can read taken as the newest.
func TestIstioAtLeast(t *testing.T) {
	for _, tc := range []struct {
		version string
		want    bool
	}{
		{"1.30.0", true}, {"1.29.9", false}, {"1.31-dev", true}, {"release-1.30", true},
		{"1.3.0", false}, {"2.0.0", true}, {"", true}, {"master", true}, {"1.100.1", true},
	} {
		if got := IstioAtLeast(&model.Proxy{IstioVersion: tc.version}, 1, 30); got != tc.want {
			t.Errorf("%q at least 1.30: %v, want %v", tc.version, got, tc.want)
		}
	}
}
