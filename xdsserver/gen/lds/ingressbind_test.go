package lds

import (
	"testing"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/xdsserver/gen/scope"
)

// TestIngressBind: a Sidecar ingress listener's chains are named after
// the proxy's first global unicast IP, as istiod's
// getSidecarInboundBindIPs; without one, after the wildcard of its
// family. A service port's are named after the IPv4 wildcard.
func TestIngressBind(t *testing.T) {
	sc := scope.Instance{Sidecar: &config.Config{Meta: config.Meta{Name: "web"}}}
	for _, c := range []struct {
		ips  []string
		in   scope.Instance
		want string
	}{
		{[]string{"127.0.0.1", "10.0.0.5"}, sc, "10.0.0.5"},
		{[]string{"2001:db8::5"}, sc, "2001:db8::5"},
		{[]string{"127.0.0.1"}, sc, "0.0.0.0"},
		{[]string{"fe80::1"}, sc, "::"},
		{nil, sc, "0.0.0.0"},
		{[]string{"10.0.0.5"}, scope.Instance{}, "0.0.0.0"},
	} {
		if got := ingressBind(&model.Proxy{IPs: c.ips}, c.in); got != c.want {
			t.Errorf("IPs %v, Sidecar %v: %q, want %q", c.ips, c.in.Sidecar != nil, got, c.want)
		}
	}
}
