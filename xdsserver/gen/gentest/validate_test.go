package gentest

import (
	"strings"
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"

	"github.com/baremesh/baremesh/xdsserver/gen"
)

// TestCheckUnpacksAny proves Check reaches into an Any: the listener is
// valid by itself, the HttpConnectionManager packed in it is not (no
// stat_prefix), and ValidateAll on the listener alone would not say so.
func TestCheckUnpacksAny(t *testing.T) {
	bad := &hcmv3.HttpConnectionManager{RouteSpecifier: &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{ConfigSource: gen.ADS(), RouteConfigName: "80"}}}
	l := &listenerv3.Listener{Name: "l", Address: gen.SocketAddress("0.0.0.0", 80), FilterChains: []*listenerv3.FilterChain{{
		Filters: []*listenerv3.Filter{{Name: "hcm", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: gen.MustAny(bad)}}},
	}}}
	if err := l.ValidateAll(); err != nil {
		t.Fatalf("listener itself should pass: %v", err)
	}
	err := Check(l)
	if err == nil || !strings.Contains(err.Error(), "StatPrefix") {
		t.Fatalf("Check = %v, want a StatPrefix error from inside the Any", err)
	}
	bad.StatPrefix = "x"
	l.FilterChains[0].Filters[0].ConfigType = &listenerv3.Filter_TypedConfig{TypedConfig: gen.MustAny(bad)}
	if err := Check(l); err != nil {
		t.Fatalf("Check = %v after fixing", err)
	}
}
