package cds

import (
	"strconv"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
)

// TestIngressEndpoint follows istiod's buildInboundClustersFromSidecar:
// 0.0.0.0 is the proxy's first IPv4 address, "::" its first IPv6 one,
// each else loopback; unix:// a pipe; what does not parse, no cluster.
func TestIngressEndpoint(t *testing.T) {
	ips := []string{"fd00::5", "10.5.0.1"}
	tests := []struct {
		ep       string
		ips      []string
		want     string // "host:port" or "pipe:path"
		loopback bool
		ok       bool
	}{
		{"127.0.0.1:8081", ips, "127.0.0.1:8081", true, true},
		{"[::1]:8081", ips, "::1:8081", true, true},
		{"0.0.0.0:8081", ips, "10.5.0.1:8081", false, true},
		{"0.0.0.0:8081", []string{"fd00::5"}, "127.0.0.1:8081", true, true},
		{"[::]:8081", ips, "fd00::5:8081", false, true},
		{"unix:///var/run/a.sock", ips, "pipe:/var/run/a.sock", true, true},
		{"unix://", ips, "", true, false},
		{"127.0.0.1", ips, "", false, false},
		{"127.0.0.1:http", ips, "", false, false},
	}
	for _, tt := range tests {
		addr, loopback, ok := ingressEndpoint(tt.ep, tt.ips)
		if ok != tt.ok {
			t.Errorf("%s: ok = %v, want %v", tt.ep, ok, tt.ok)
			continue
		}
		if !ok {
			continue
		}
		var got string
		switch a := addr.GetAddress().(type) {
		case *corev3.Address_Pipe:
			got = "pipe:" + a.Pipe.GetPath()
		case *corev3.Address_SocketAddress:
			got = a.SocketAddress.GetAddress() + ":" + strconv.FormatUint(uint64(a.SocketAddress.GetPortValue()), 10)
		}
		if got != tt.want || loopback != tt.loopback {
			t.Errorf("%s: got %s (loopback %v), want %s (loopback %v)", tt.ep, got, loopback, tt.want, tt.loopback)
		}
	}
}
