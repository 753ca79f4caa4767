package lds

import (
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	corsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/cors/v3"
	faultv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/fault/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	httpinspectorv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/http_inspector/v3"
	originaldstv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/original_dst/v3"
	tlsinspectorv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/tls_inspector/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"

	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/rds"
)

// Well-known filter names.
const (
	hcmName           = "envoy.filters.network.http_connection_manager"
	tcpProxyName      = "envoy.filters.network.tcp_proxy"
	routerName        = "envoy.filters.http.router"
	tlsInspectorName  = "envoy.filters.listener.tls_inspector"
	httpInspectorName = "envoy.filters.listener.http_inspector"
	originalDstName   = "envoy.filters.listener.original_dst"
)

// The filters below have constant configs. Each is built and packed once
// per process and shared by every listener of every output; they are
// never altered (outputs are only marshalled), so sharing is safe across
// goroutines. Repacking them per listener was most of LDS's allocations.
var (
	sharedRouter = &hcmv3.HttpFilter{Name: routerName, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: gen.MustAny(&routerv3.Router{})}}
	// quietRouter adds none of Envoy's debug headers
	// (proxyHeaders.envoyDebugHeaders disabled).
	quietRouter = &hcmv3.HttpFilter{Name: routerName, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: gen.MustAny(&routerv3.Router{SuppressEnvoyHeaders: true})}}
	sharedFault = &hcmv3.HttpFilter{Name: rds.FaultFilterName, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: gen.MustAny(&faultv3.HTTPFault{})}}
	sharedCORS  = &hcmv3.HttpFilter{Name: rds.CORSFilterName, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: gen.MustAny(&corsv3.Cors{})}}
	// The TLS inspector reads at most 512 bytes of a ClientHello at first
	// (Envoy's default: 64 KiB), as istiod's.
	sharedTLSInspector  = &listenerv3.ListenerFilter{Name: tlsInspectorName, ConfigType: &listenerv3.ListenerFilter_TypedConfig{TypedConfig: gen.MustAny(&tlsinspectorv3.TlsInspector{InitialReadBufferSize: wrapperspb.UInt32(512)})}}
	sharedHTTPInspector = &listenerv3.ListenerFilter{Name: httpInspectorName, ConfigType: &listenerv3.ListenerFilter_TypedConfig{TypedConfig: gen.MustAny(&httpinspectorv3.HttpInspector{})}}
	sharedOriginalDst   = &listenerv3.ListenerFilter{Name: originalDstName, ConfigType: &listenerv3.ListenerFilter_TypedConfig{TypedConfig: gen.MustAny(&originaldstv3.OriginalDst{})}}
	// sharedADS is the RDS config source inside HTTP connection managers,
	// which are marshalled into their Any at once.
	sharedADS = gen.ADS()
	// sidecarHTTPFilters are Istio's HTTP filters of an outbound or
	// gateway connection manager: fault injection and CORS, whose
	// per-route configs routes may carry, then the router. Istio adds
	// both whether or not a route uses them.
	sidecarHTTPFilters = []*hcmv3.HttpFilter{sharedFault, sharedCORS, sharedRouter}
)

func routerFilter() *hcmv3.HttpFilter { return sharedRouter }

// hcmRDS is an HTTP connection manager fetching route config name over
// ADS, with Istio's sidecar filters: fault injection, CORS, then the
// router.
func hcmRDS(statPrefix, routeName string, filters ...*hcmv3.HttpFilter) *hcmv3.HttpConnectionManager {
	if filters == nil {
		filters = sidecarHTTPFilters
	}
	return &hcmv3.HttpConnectionManager{
		StatPrefix: statPrefix,
		RouteSpecifier: &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{
			ConfigSource: sharedADS, RouteConfigName: routeName,
		}},
		HttpFilters: filters,
	}
}

// hcmInline is an HTTP connection manager with an inline route config
// and only the router filter.
func hcmInline(statPrefix string, rc *routev3.RouteConfiguration) *hcmv3.HttpConnectionManager {
	return &hcmv3.HttpConnectionManager{
		StatPrefix:     statPrefix,
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: rc},
		HttpFilters:    []*hcmv3.HttpFilter{routerFilter()},
	}
}

func hcmFilter(h *hcmv3.HttpConnectionManager) *listenerv3.Filter {
	mxFirst(h)
	return typedFilter(hcmName, h)
}

// typedFilter is a network filter with a packed config. The filter and
// its oneof wrapper are allocated as one block (there is one or two per
// filter chain); nothing copies them afterwards.
func typedFilter(name string, cfg proto.Message) *listenerv3.Filter {
	b := &struct {
		f  listenerv3.Filter
		tc listenerv3.Filter_TypedConfig
	}{}
	b.tc.TypedConfig = gen.MustAny(cfg)
	b.f.Name, b.f.ConfigType = name, &b.tc
	return &b.f
}

// tcpProxy forwards to cluster.
func tcpProxy(statPrefix, cluster string, idle *durationpb.Duration) *listenerv3.Filter {
	return tcpProxyTo(&tcpproxyv3.TcpProxy{StatPrefix: statPrefix, ClusterSpecifier: &tcpproxyv3.TcpProxy_Cluster{Cluster: cluster}, IdleTimeout: idle})
}

func tcpProxyTo(tp *tcpproxyv3.TcpProxy) *listenerv3.Filter {
	return typedFilter(tcpProxyName, tp)
}

func tlsInspector() *listenerv3.ListenerFilter { return sharedTLSInspector }

func httpInspector() *listenerv3.ListenerFilter { return sharedHTTPInspector }

func originalDst() *listenerv3.ListenerFilter { return sharedOriginalDst }
