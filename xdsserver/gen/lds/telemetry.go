package lds

import (
	"slices"
	"strconv"
	"sync"

	xdsudpa "github.com/cncf/xds/go/udpa/type/v1"
	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	grpcstatsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/grpc_stats/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	uuidv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/request_id/uuid/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	alpnv2 "istio.io/api/envoy/config/filter/http/alpn/v2alpha1"

	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/rds"
	"github.com/baremesh/baremesh/xdsserver/gen/scope"
	"github.com/baremesh/baremesh/xdsserver/gen/telemetry"
)

// Istio's telemetry in listeners, for istio-proxy only (model.Proxy.IstioProxy:
// a plain Envoy cannot load Istio's filters, proxyless gRPC has no HTTP
// filters of its own). As istiod 1.31 writes them:
//   - every connection manager: the peer metadata filter first (named
//     istio.metadata_exchange; downstream discovery and propagation on
//     inbound, upstream on outbound and gateways), then the policy
//     filters, grpc_stats before fault and CORS, istio.alpn (outbound and
//     gateways: the upstream ALPN Istio's mTLS chains match), the stats
//     filter of the Telemetry API's metrics before the router; stat
//     prefixes end in ";" (istio-proxy's stat tag regexes split there);
//     tracing and the UUID request-ID extension; access logs;
//   - every virtualInbound chain: the TCP metadata exchange filter first.
// Outbound TCP exchanges metadata in the cluster's filter (cds).

// Filter names and type URLs of istio-proxy's own extensions.
const (
	mxName          = "istio.metadata_exchange"
	grpcStatsName   = "envoy.filters.http.grpc_stats"
	alpnName        = "istio.alpn"
	peerMetadataURL = "type.googleapis.com/io.istio.http.peer_metadata.Config"
	tcpMXURL        = "type.googleapis.com/envoy.tcp.metadataexchange.config.MetadataExchange"
)

// Shared, never altered (outputs are only marshalled).
var (
	mxInbound  = peerMetadataFilter("downstream", map[string]any{})
	mxOutbound = peerMetadataFilter("upstream", map[string]any{})
	// mxOutboundInMesh is mxOutbound propagating its headers to mesh
	// clusters only (proxyHeaders.metadataExchangeHeaders IN_MESH).
	mxOutboundInMesh = peerMetadataFilter("upstream", map[string]any{"skip_external_clusters": true})
	grpcStats        = &hcmv3.HttpFilter{Name: grpcStatsName, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: gen.MustAny(&grpcstatsv3.FilterConfig{
		EmitFilterState:        true,
		PerMethodStatSpecifier: &grpcstatsv3.FilterConfig_StatsForAllMethods{StatsForAllMethods: wrapperspb.Bool(false)},
	})}}
	alpnFilter = &hcmv3.HttpFilter{Name: alpnName, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: gen.MustAny(&alpnv2.FilterConfig{
		AlpnOverride: []*alpnv2.FilterConfig_AlpnOverride{
			{UpstreamProtocol: alpnv2.FilterConfig_HTTP10, AlpnOverride: []string{"istio-http/1.0", "istio", "http/1.0"}},
			{UpstreamProtocol: alpnv2.FilterConfig_HTTP11, AlpnOverride: []string{"istio-http/1.1", "istio", "http/1.1"}},
			{UpstreamProtocol: alpnv2.FilterConfig_HTTP2, AlpnOverride: []string{"istio-h2", "istio", "h2"}},
		},
	})}}
	// tcpMX is the TCP metadata exchange of inbound chains.
	tcpMX = &listenerv3.Filter{Name: mxName, ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: gen.MustAny(TypedStruct(tcpMXURL, map[string]any{
		"protocol": "istio-peer-exchange", "enable_discovery": true,
	}))}}
	// uuidRequestID samples traces by the request ID (istiod's default);
	// uuidNoIDSampling is a Telemetry's useRequestIdForTraceSampling false.
	uuidRequestID    = &hcmv3.RequestIDExtension{TypedConfig: gen.MustAny(&uuidv3.UuidRequestIdConfig{UseRequestIdForTraceSampling: wrapperspb.Bool(true)})}
	uuidNoIDSampling = &hcmv3.RequestIDExtension{TypedConfig: gen.MustAny(&uuidv3.UuidRequestIdConfig{UseRequestIdForTraceSampling: wrapperspb.Bool(false)})}
)

// TypedStruct is istiod's encoding of an istio-proxy config whose proto
// go-control-plane lacks: a udpa TypedStruct of the type URL and fields.
func TypedStruct(typeURL string, fields map[string]any) *xdsudpa.TypedStruct {
	s, err := structpb.NewStruct(fields)
	if err != nil {
		panic("lds: typed struct " + typeURL + ": " + err.Error())
	}
	return &xdsudpa.TypedStruct{TypeUrl: typeURL, Value: s}
}

// peerMetadataFilter is istiod's peer metadata filter of one side
// ("downstream" inbound, "upstream" outbound): discovery from Istio's
// headers then the workload, propagation in Istio's headers with the
// given options (skip_external_clusters: only toward mesh clusters).
func peerMetadataFilter(side string, propagation map[string]any) *hcmv3.HttpFilter {
	ts := TypedStruct(peerMetadataURL, map[string]any{
		side + "_discovery":   []any{map[string]any{"istio_headers": map[string]any{}}, map[string]any{"workload_discovery": map[string]any{}}},
		side + "_propagation": []any{map[string]any{"istio_headers": propagation}},
	})
	return &hcmv3.HttpFilter{Name: mxName, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: gen.MustAny(ts)}}
}

// hcmTelemetry is the telemetry of one proxy's connection managers of one
// class: resolved once per generation, shared by its connection managers
// and never altered.
type hcmTelemetry struct {
	tracing   *hcmv3.HttpConnectionManager_Tracing
	requestID *hcmv3.RequestIDExtension
	stats     []*hcmv3.HttpFilter // before the router
	accessLog []*accesslogv3.AccessLog
}

// telemetryMemo keeps each distinct telemetry by its key (hcmOpts.tel):
// hcmOpts must stay comparable (it keys rdsRest). It holds as many
// entries as distinct tracing/logging set-ups were generated; a mesh has
// few (its Telemetry resources times proxy label sets).
var telemetryMemo sync.Map // string -> *hcmTelemetry

// withTelemetry fills o's telemetry for class from the snapshot and
// proxy: for every Envoy the tracing, request ID and access logs (Envoy's
// own features), for istio-proxy also Istio's filters and stat names.
func withTelemetry(o hcmOpts, v *scope.View) hcmOpts {
	if v.Proxy.Proxyless {
		return o
	}
	o.istio = v.Proxy.IstioProxy
	cfg := telemetry.For(v.Push, v.Proxy, telemetryClass(o.class))
	t := &hcmTelemetry{requestID: uuidRequestID}
	t.tracing = tracingOf(cfg, v)
	if tr := cfg.Tracing; tr != nil && !tr.Disabled && t.tracing != nil && !tr.UseRequestIDForTraceSampling {
		t.requestID = uuidNoIDSampling
	}
	if o.istio {
		t.stats = statsFilters(cfg, o.class) // stats.go: istio.stats is istio-proxy's
	}
	t.accessLog = accessLogsOf(cfg, v)
	key := t.key()
	telemetryMemo.LoadOrStore(key, t) // the first stored for key stays; o.tel names it
	o.tel = key
	return o
}

func telemetryClass(c httpClass) telemetry.Class {
	switch c {
	case inboundHTTP:
		return telemetry.ServerSide
	case gatewayHTTP:
		return telemetry.Gateway
	}
	return telemetry.ClientSide
}

// key is t's deterministic encoding (its identity in telemetryMemo).
func (t *hcmTelemetry) key() string {
	h := &hcmv3.HttpConnectionManager{Tracing: t.tracing, RequestIdExtension: t.requestID, HttpFilters: t.stats, AccessLog: t.accessLog}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(h)
	if err != nil {
		panic("lds: marshal telemetry: " + err.Error())
	}
	return string(b)
}

// applyTelemetry sets o's telemetry on h (called by hcmOpts.apply).
func (o hcmOpts) applyTelemetry(h *hcmv3.HttpConnectionManager) {
	if o.tel == "" {
		return // proxyless
	}
	var t *hcmTelemetry
	if v, ok := telemetryMemo.Load(o.tel); ok {
		t = v.(*hcmTelemetry)
	} else {
		t = &hcmTelemetry{requestID: uuidRequestID}
	}
	h.Tracing, h.RequestIdExtension, h.AccessLog = t.tracing, t.requestID, t.accessLog
	if !o.istio {
		return
	}
	if h.StatPrefix != "" {
		h.StatPrefix = delimitedStat(h.StatPrefix)
	}
	h.HttpFilters = istioHTTPFilters(o.class, h.HttpFilters, t.stats)
	if o.ph.MXInMesh && o.class != inboundHTTP {
		for i, f := range h.HttpFilters {
			if f == mxOutbound {
				h.HttpFilters[i] = mxOutboundInMesh // h.HttpFilters is istioHTTPFilters' own
			}
		}
	}
}

// delimitedStat ends a stat prefix in ";" as istiod's
// DelimitedStatsPrefix (istio-proxy's stat tag regexes end a name there).
func delimitedStat(s string) string {
	if s == "" || s[len(s)-1] == ';' {
		return s
	}
	return s + ";"
}

// istioHTTPFilters is filters with istio-proxy's: the peer metadata filter
// first, grpc_stats (and istio.alpn off inbound) before the fault
// filter, stats before the router.
func istioHTTPFilters(class httpClass, filters, stats []*hcmv3.HttpFilter) []*hcmv3.HttpFilter {
	out := make([]*hcmv3.HttpFilter, 0, len(filters)+4+len(stats))
	if class == inboundHTTP {
		out = append(out, mxInbound)
	} else {
		out = append(out, mxOutbound)
	}
	placed := false
	for _, f := range filters {
		if !placed && (f.GetName() == rds.FaultFilterName || f.GetName() == routerName) {
			out = append(out, grpcStats)
			if class != inboundHTTP {
				out = append(out, alpnFilter)
			}
			placed = true
		}
		if f.GetName() == routerName {
			out = append(out, stats...)
		}
		out = append(out, f)
	}
	return out
}

// mxFirst moves the peer metadata filter to the front of h's filters
// where policy filters were put before it after apply (istiod runs it
// first, so RBAC denials still carry peer metadata: istio/istio#41066).
func mxFirst(h *hcmv3.HttpConnectionManager) {
	i := slices.IndexFunc(h.HttpFilters, func(f *hcmv3.HttpFilter) bool { return f.GetName() == mxName })
	if i <= 0 {
		return
	}
	out := make([]*hcmv3.HttpFilter, 0, len(h.HttpFilters))
	out = append(out, h.HttpFilters[i])
	out = append(out, h.HttpFilters[:i]...)
	h.HttpFilters = append(out, h.HttpFilters[i+1:]...)
}

// inboundMX puts the TCP metadata exchange filter first in every chain of
// an istio-proxy's virtualInbound listener, as istiod. Chains may share
// filter lists: each gets its own.
func inboundMX(v *scope.View, l *listenerv3.Listener) {
	if !v.Proxy.IstioProxy {
		return
	}
	for _, fc := range l.FilterChains {
		fs := make([]*listenerv3.Filter, 0, len(fc.Filters)+1)
		fc.Filters = append(append(fs, tcpMX), fc.Filters...)
	}
}

// decorate names the spans of an inbound route config's routes as
// istiod's default inbound route does: "HOST:PORT/*" of the service
// (":0/*" for the catch-all). Only tracing reads the decorator.
func decorate(rc *routev3.RouteConfiguration, host string, port uint32) {
	op := host + ":" + strconv.Itoa(int(port)) + "/*"
	for _, vh := range rc.GetVirtualHosts() {
		for _, r := range vh.GetRoutes() {
			r.Decorator = &routev3.Decorator{Operation: op}
		}
	}
}
