package lds

import (
	"strings"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	statsv1 "istio.io/api/envoy/extensions/stats"
	meshv1alpha1 "istio.io/api/mesh/v1alpha1"

	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/scope"
	"github.com/baremesh/baremesh/xdsserver/gen/telemetry"
)

// statsName is istio-proxy's stats filter (HTTP and network).
const statsName = "istio.stats"

// Istio's metric names for the Telemetry API's metric enum.
var prometheusMetric = map[string]string{
	"REQUEST_COUNT": "requests_total", "REQUEST_DURATION": "request_duration_milliseconds",
	"REQUEST_SIZE": "request_bytes", "RESPONSE_SIZE": "response_bytes",
	"TCP_OPENED_CONNECTIONS": "tcp_connections_opened_total", "TCP_CLOSED_CONNECTIONS": "tcp_connections_closed_total",
	"TCP_SENT_BYTES": "tcp_sent_bytes_total", "TCP_RECEIVED_BYTES": "tcp_received_bytes_total",
	"GRPC_REQUEST_MESSAGES": "request_messages_total", "GRPC_RESPONSE_MESSAGES": "response_messages_total",
}

// statsConfigs are the istio.stats configs of the Prometheus providers
// (istiod's generateStatsConfig): none where the side's metrics are off;
// host header fallback off on inbound and gateways; the overrides as
// metric configs (drop, tag dimensions, tags removed).
func statsConfigs(cfg *telemetry.Config, class httpClass, istio bool) []*anypb.Any {
	if !istio {
		return nil // istio.stats is istio-proxy's
	}
	var out []*anypb.Any
	for _, m := range cfg.Metrics {
		if _, ok := m.Provider.GetProvider().(*meshv1alpha1.MeshConfig_ExtensionProvider_Prometheus); !ok || m.Disabled {
			continue
		}
		pc := &statsv1.PluginConfig{
			DisableHostHeaderFallback: class == inboundHTTP || class == gatewayHTTP,
			TcpReportingDuration:      m.ReportingInterval,
		}
		for _, o := range m.Overrides {
			name, ok := prometheusMetric[o.Name]
			if !ok {
				name = o.Name
			}
			mc := &statsv1.MetricConfig{Name: name, Drop: o.Disabled, Dimensions: map[string]string{}}
			for _, t := range o.Tags {
				if t.Remove {
					mc.TagsToRemove = append(mc.TagsToRemove, t.Name)
				} else {
					mc.Dimensions[t.Name] = t.Value
				}
			}
			pc.Metrics = append(pc.Metrics, mc)
		}
		out = append(out, gen.MustAny(pc))
	}
	return out
}

// statsFilters are the HTTP istio.stats filters, before the router.
func statsFilters(cfg *telemetry.Config, class httpClass) []*hcmv3.HttpFilter {
	var out []*hcmv3.HttpFilter
	for _, a := range statsConfigs(cfg, class, true) {
		out = append(out, &hcmv3.HttpFilter{Name: statsName, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: a}})
	}
	return out
}

// tcpTelemetry completes an Envoy's listeners as istiod does outside
// connection managers: the access logs on each tcp_proxy and the
// listener's own access log of connections no chain took (response flag
// NR); for istio-proxy also the network istio.stats filters before each
// tcp_proxy.
func tcpTelemetry(v *scope.View, ls []*listenerv3.Listener) {
	if v.Proxy.Proxyless || len(ls) == 0 {
		return
	}
	per := map[httpClass]*tcpTel{}
	// Listeners may share a chain (the outbound listeners' default
	// PassthroughFilterChain): each is completed once.
	done := map[*listenerv3.FilterChain]bool{}
	for _, l := range ls {
		class := outboundHTTP
		switch {
		case v.Proxy.Type == model.Router:
			class = gatewayHTTP
		case l.Name == gen.VirtualInboundListener:
			class = inboundHTTP
		}
		t := per[class]
		if t == nil {
			cfg := telemetry.For(v.Push, v.Proxy, telemetryClass(class))
			t = &tcpTel{logs: accessLogsOf(cfg, v)}
			for _, a := range statsConfigs(cfg, class, v.Proxy.IstioProxy) {
				t.stats = append(t.stats, &listenerv3.Filter{Name: statsName, ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: a}})
			}
			for _, al := range t.logs {
				t.listenerLogs = append(t.listenerLogs, withFilter(al, nrFilter))
			}
			per[class] = t
		}
		if len(t.stats) == 0 && len(t.logs) == 0 {
			continue
		}
		// istiod logs unmatched connections on the virtual listeners and
		// gateways only.
		if class == gatewayHTTP || l.Name == gen.VirtualInboundListener || l.Name == gen.VirtualOutboundListener {
			l.AccessLog = append(l.AccessLog, t.listenerLogs...)
		}
		for _, fc := range l.FilterChains {
			// istiod's blackhole chains (virtualInbound's own port,
			// virtualOutbound's) count but do not log.
			t.chain(fc, !strings.HasSuffix(fc.GetName(), "-blackhole"), done)
		}
		if l.DefaultFilterChain != nil {
			t.chain(l.DefaultFilterChain, true, done)
		}
	}
}

type tcpTel struct {
	stats        []*listenerv3.Filter
	logs         []*accesslogv3.AccessLog
	listenerLogs []*accesslogv3.AccessLog
}

// chain adds the stats and access logs to a chain ending in tcp_proxy.
// Chains may share filter lists: the chain gets its own.
func (t *tcpTel) chain(fc *listenerv3.FilterChain, logs bool, done map[*listenerv3.FilterChain]bool) {
	if done[fc] {
		return
	}
	done[fc] = true
	n := len(fc.Filters)
	if n == 0 || fc.Filters[n-1].GetName() != tcpProxyName {
		return
	}
	last := fc.Filters[n-1]
	if logs && len(t.logs) > 0 {
		var tp tcpproxyv3.TcpProxy
		if err := last.GetTypedConfig().UnmarshalTo(&tp); err == nil {
			tp.AccessLog = append(tp.AccessLog, t.logs...)
			last = tcpProxyTo(&tp)
		}
	}
	out := make([]*listenerv3.Filter, 0, n+len(t.stats))
	out = append(out, fc.Filters[:n-1]...)
	out = append(out, t.stats...)
	fc.Filters = append(out, last)
}

// nrFilter logs only connections no filter chain matched.
var nrFilter = &accesslogv3.AccessLogFilter{FilterSpecifier: &accesslogv3.AccessLogFilter_ResponseFlagFilter{
	ResponseFlagFilter: &accesslogv3.ResponseFlagFilter{Flags: []string{"NR"}},
}}

// withFilter is al with f and its own filter both required.
func withFilter(al *accesslogv3.AccessLog, f *accesslogv3.AccessLogFilter) *accesslogv3.AccessLog {
	out := proto.Clone(al).(*accesslogv3.AccessLog)
	if out.Filter == nil {
		out.Filter = f
	} else {
		out.Filter = &accesslogv3.AccessLogFilter{FilterSpecifier: &accesslogv3.AccessLogFilter_AndFilter{AndFilter: &accesslogv3.AndFilter{
			Filters: []*accesslogv3.AccessLogFilter{f, al.Filter},
		}}}
	}
	return out
}
