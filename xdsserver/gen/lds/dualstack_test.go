package lds

import (
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"

	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/gentest"
)

// TestDualStackListeners (issue #25 item 8): a proxy with addresses of
// both families gets its capture listeners and wildcard outbound
// listeners on 0.0.0.0 and :: (an additional address), as istiod with
// ISTIO_DUAL_STACK; an IPv6-only proxy on ::; an IPv4 one on 0.0.0.0
// only. Before, every listener was 0.0.0.0 only, so the IPv6 connections
// the agent captures (it captures IPv6 by default) found no listener.
// Under TPROXY the capture listeners are transparent and virtualInbound
// restores the source (original_src).
func TestDualStackListeners(t *testing.T) {
	pc := gentest.MustBuild(t, inboundWorld, peerAuthn("PERMISSIVE", ""))
	for _, tc := range []struct {
		name, ips, mode string
		want            []string // addresses of virtualOutbound, virtualInbound and 0.0.0.0_8080
	}{
		{"ipv4", "10.0.0.1", "", []string{"0.0.0.0"}},
		{"dual", "10.0.0.1,fd00::1", "", []string{"0.0.0.0", "::"}},
		{"ipv6", "fd00::1", "", []string{"::"}},
		{"dual tproxy", "10.0.0.1,fd00::1", "TPROXY", []string{"0.0.0.0", "::"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			md := map[string]string{"INSTANCE_IPS": tc.ips}
			if tc.mode != "" {
				md["INTERCEPTION_MODE"] = tc.mode
			}
			p := gentest.Node(t, "sidecar~10.0.0.1~web.default~default.svc.cluster.local", md)
			seen := 0
			for _, r := range gentest.Run(t, Generate, gen.Input{Push: pc, Proxy: p}) {
				l := r.Resource.(*listenerv3.Listener)
				switch l.GetName() {
				case gen.VirtualOutboundListener, gen.VirtualInboundListener:
					if tproxy := l.GetTransparent().GetValue(); tproxy != (tc.mode == "TPROXY") {
						t.Errorf("%s: transparent %v under %q", l.GetName(), tproxy, tc.mode)
					}
				case "0.0.0.0_8080":
					if tc.want[0] == "::" {
						continue // an IPv6-only proxy's HTTP port: see below
					}
				default:
					continue
				}
				seen++
				got := []string{l.GetAddress().GetSocketAddress().GetAddress()}
				for _, a := range l.GetAdditionalAddresses() {
					got = append(got, a.GetAddress().GetSocketAddress().GetAddress())
				}
				if len(got) != len(tc.want) || got[0] != tc.want[0] || got[len(got)-1] != tc.want[len(tc.want)-1] {
					t.Errorf("%s: addresses %v, want %v", l.GetName(), got, tc.want)
				}
				if l.GetName() == gen.VirtualInboundListener {
					hasSrc := false
					for _, f := range l.GetListenerFilters() {
						hasSrc = hasSrc || f.GetName() == "envoy.filters.listener.original_src"
					}
					if hasSrc != (tc.mode == "TPROXY") {
						t.Errorf("original_src listener filter: %v under %q", hasSrc, tc.mode)
					}
				}
			}
			if seen < 2 {
				t.Fatalf("only %d of the checked listeners generated", seen)
			}
		})
	}
}
