package scope_test

import (
	"testing"

	"github.com/baremesh/baremesh/xdsserver/gen/gentest"
	"github.com/baremesh/baremesh/xdsserver/gen/scope"
)

// TestFQDN checks that only short names are expanded: IP addresses,
// names with dots and wildcards are kept, as Istio's
// ResolveShortnameToFQDN keeps them.
func TestFQDN(t *testing.T) {
	v := scope.New(gentest.MustBuild(t), gentest.Node(t, "sidecar~10.1.1.1~p.ns~ns.svc.cluster.local", nil))
	for _, tc := range []struct{ host, want string }{
		{"reviews", "reviews.default.svc.cluster.local"},
		{"reviews.other", "reviews.other"},
		{"reviews.default.svc.cluster.local", "reviews.default.svc.cluster.local"},
		{"10.0.0.5", "10.0.0.5"},
		{"2001:db8::5", "2001:db8::5"},
		{"::1", "::1"},
		{"fe80::1%eth0", "fe80::1%eth0"},
		{"[2001:db8::5]", "[2001:db8::5]"},
		{"*", "*"},
		{"*.example.com", "*.example.com"},
		{"", ""},
	} {
		if got := v.FQDN(tc.host, "default"); got != tc.want {
			t.Errorf("FQDN(%q) = %q, want %q", tc.host, got, tc.want)
		}
	}
}
