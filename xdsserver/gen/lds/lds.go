// Package lds generates Envoy listeners (LDS): for sidecars Istio's
// virtualOutbound (15001) and virtualInbound (15006) listeners and one
// outbound listener per service port (HTTP, TCP, TLS, auto-detect); for
// gateways one listener per Gateway server port; for proxyless gRPC the
// API listeners clients name after their "xds:///host:port" targets and
// the inbound listener a gRPC server asks for.
//
// It imports core and xdsserver/gen only.
package lds

import (
	"fmt"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"

	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/scope"
)

var _ gen.Generator = Generate

// Generate builds the proxy's listeners. Envoy asks for all of them (no
// names); with names, only those are returned. Proxyless gRPC always
// names its listeners; a name that resolves to nothing is left out.
func Generate(in gen.Input) ([]gen.Resource, error) {
	if in.Push == nil || in.Proxy == nil {
		return nil, fmt.Errorf("lds: missing push context or proxy")
	}
	var v *scope.View
	if in.Proxy.Type == model.Router && !in.Proxy.Proxyless {
		v = scope.NewForLookups(in.Push, in.Proxy) // gateway listeners list no services
	} else {
		v = scope.New(in.Push, in.Proxy)
	}
	var ls []*listenerv3.Listener
	switch {
	case in.Part == gen.PartInbound && (in.Proxy.Proxyless || in.Proxy.Type == model.Router):
		return nil, nil // (gen.Part: no sides)
	case in.Proxy.Proxyless:
		return grpcListeners(v, in.Names), nil
	case in.Proxy.Type == model.Router:
		ls = gatewayListeners(v)
	case in.Part == gen.PartShared:
		ls = append(ls, virtualOutbound(v))
		ls = append(ls, outboundListeners(v)...)
	case in.Part == gen.PartInbound:
		ls = append(ls, virtualInbound(v))
	default:
		ls = append(ls, virtualOutbound(v), virtualInbound(v))
		ls = append(ls, outboundListeners(v)...)
	}
	tcpTelemetry(v, ls) // stats.go
	return filter(ls, in.Names), nil
}

func filter(ls []*listenerv3.Listener, names []string) []gen.Resource {
	var want map[string]bool
	if len(names) > 0 {
		want = make(map[string]bool, len(names))
		for _, n := range names {
			want[n] = true
		}
	}
	out := make([]gen.Resource, 0, len(ls))
	for _, l := range ls {
		if want == nil || want[l.Name] {
			out = append(out, gen.Resource{Name: l.Name, Resource: l})
		}
	}
	return out
}
