package config

import "testing"

func TestResolveGatewayName(t *testing.T) {
	for _, c := range []struct{ name, ns, want string }{
		{"gw", "default", "default/gw"},
		{"./gw", "default", "default/gw"},
		{"other/gw", "default", "other/gw"},
		{"gw.other.svc.cluster.local", "default", "other/gw"},
		{"gw.other", "default", "other/gw"},
		{"mesh", "default", "mesh"},
	} {
		if got := ResolveGatewayName(c.name, c.ns); got != c.want {
			t.Errorf("ResolveGatewayName(%q, %q) = %q, want %q", c.name, c.ns, got, c.want)
		}
		if !GatewayNamed([]string{"x/y", c.name}, c.ns, c.want) {
			t.Errorf("GatewayNamed([%q], %q, %q) = false", c.name, c.ns, c.want)
		}
	}
	if GatewayNamed([]string{"gw"}, "default", "other/gw") {
		t.Error("a short name matched another namespace's gateway")
	}
	if GatewayNamed([]string{"gw"}, "default", "mesh") || GatewayNamed([]string{"mesh"}, "default", "default/mesh") {
		t.Error("mesh confused with a Gateway named mesh")
	}
}
