package rds

import (
	"testing"

	networking "istio.io/api/networking/v1alpha3"
)

// TestRedirectPort follows istiod's ApplyRedirect: FROM_REQUEST_PORT is
// the listener's port, FROM_PROTOCOL_DEFAULT none, and a port that is
// the scheme's default (http 80, https 443; the server's scheme unless
// the redirect sets one) is left out. Before, derivePort was ignored and
// a default port was written out.
func TestRedirectPort(t *testing.T) {
	derive := func(d networking.HTTPRedirect_RedirectPortSelection) *networking.HTTPRedirect {
		return &networking.HTTPRedirect{RedirectPort: &networking.HTTPRedirect_DerivePort{DerivePort: d}}
	}
	port := func(p uint32, scheme string) *networking.HTTPRedirect {
		return &networking.HTTPRedirect{Scheme: scheme, RedirectPort: &networking.HTTPRedirect_Port{Port: p}}
	}
	for _, tc := range []struct {
		name     string
		r        *networking.HTTPRedirect
		listener uint32
		tls      bool
		want     uint32
	}{
		{"request port", derive(networking.HTTPRedirect_FROM_REQUEST_PORT), 8080, false, 8080},
		{"request port 80 on http", derive(networking.HTTPRedirect_FROM_REQUEST_PORT), 80, false, 0},
		{"request port 443 on a TLS server", derive(networking.HTTPRedirect_FROM_REQUEST_PORT), 443, true, 0},
		{"request port 443 on plain http", derive(networking.HTTPRedirect_FROM_REQUEST_PORT), 443, false, 443},
		{"protocol default", derive(networking.HTTPRedirect_FROM_PROTOCOL_DEFAULT), 8080, false, 0},
		{"port 80, scheme http", port(80, "http"), 8080, true, 0},
		{"port 80, scheme https", port(80, "https"), 8080, false, 80},
		{"port 443, the server's https", port(443, ""), 8443, true, 0},
		{"port 9443", port(9443, "https"), 80, false, 9443},
		{"no port", &networking.HTTPRedirect{Uri: "/x"}, 8080, false, 0},
	} {
		if got := redirect(tc.r, tc.listener, tc.tls).GetPortRedirect(); got != tc.want {
			t.Errorf("%s: port %d, want %d", tc.name, got, tc.want)
		}
	}
}
