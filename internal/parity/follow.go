package parity

import (
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/anypb"
)

// hcms are the HTTP connection managers of a listener: in its filter
// chains (Envoy) and its API listener (gRPC).
func hcms(l *listenerv3.Listener) []*hcmv3.HttpConnectionManager {
	var out []*hcmv3.HttpConnectionManager
	add := func(a *anypb.Any) {
		h := &hcmv3.HttpConnectionManager{}
		if a != nil && a.MessageIs(h) && a.UnmarshalTo(h) == nil {
			out = append(out, h)
		}
	}
	chains := append([]*listenerv3.FilterChain{l.GetDefaultFilterChain()}, l.GetFilterChains()...)
	for _, fc := range chains {
		for _, f := range fc.GetFilters() {
			add(f.GetTypedConfig())
		}
	}
	add(l.GetApiListener().GetApiListener())
	return out
}

// routeNames are the RDS names a listener refers to.
func routeNames(l *listenerv3.Listener) []string {
	var out []string
	for _, h := range hcms(l) {
		if n := h.GetRds().GetRouteConfigName(); n != "" {
			out = append(out, n)
		}
	}
	return out
}

// inlineRouteClusters are the clusters an inline route configuration of a
// listener points at (gRPC's inbound listeners carry one).
func inlineRouteClusters(l *listenerv3.Listener) []string {
	var out []string
	for _, h := range hcms(l) {
		if rc := h.GetRouteConfig(); rc != nil {
			out = append(out, routeClusters(rc)...)
		}
	}
	return out
}

// routeClusters are the clusters a route configuration sends to.
func routeClusters(rc *routev3.RouteConfiguration) []string {
	var out []string
	for _, vh := range rc.GetVirtualHosts() {
		for _, r := range vh.GetRoutes() {
			a := r.GetRoute()
			if c := a.GetCluster(); c != "" {
				out = append(out, c)
			}
			for _, w := range a.GetWeightedClusters().GetClusters() {
				out = append(out, w.GetName())
			}
		}
	}
	return out
}
