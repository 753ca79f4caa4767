package lds

import (
	"sort"
	"strings"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"
	celv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/filters/cel/v3"
	grpcalv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/grpc/v3"
	otelv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/open_telemetry/v3"
	otlpcommon "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
	meshv1alpha1 "istio.io/api/mesh/v1alpha1"

	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/scope"
	"github.com/baremesh/baremesh/xdsserver/gen/telemetry"
)

// Istio's default access log formats (istiod's EnvoyTextLogFormat and
// EnvoyJSONLogFormatIstio).
const istioTextLogFormat = "[%START_TIME%] \"%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)% " +
	"%PROTOCOL%\" %RESPONSE_CODE% %RESPONSE_FLAGS% " +
	"%RESPONSE_CODE_DETAILS% %CONNECTION_TERMINATION_DETAILS% " +
	"\"%UPSTREAM_TRANSPORT_FAILURE_REASON%\" %BYTES_RECEIVED% %BYTES_SENT% " +
	"%DURATION% %RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)% \"%REQ(X-FORWARDED-FOR)%\" " +
	"\"%REQ(USER-AGENT)%\" \"%REQ(X-REQUEST-ID)%\" \"%REQ(:AUTHORITY)%\" \"%UPSTREAM_HOST%\" " +
	"%UPSTREAM_CLUSTER_RAW% %UPSTREAM_LOCAL_ADDRESS% %DOWNSTREAM_LOCAL_ADDRESS% " +
	"%DOWNSTREAM_REMOTE_ADDRESS% %REQUESTED_SERVER_NAME% %ROUTE_NAME%\n"

var istioJSONLogFields = map[string]string{
	"start_time": "%START_TIME%", "route_name": "%ROUTE_NAME%", "method": "%REQ(:METHOD)%",
	"path": "%REQ(X-ENVOY-ORIGINAL-PATH?:PATH)%", "protocol": "%PROTOCOL%", "response_code": "%RESPONSE_CODE%",
	"response_flags": "%RESPONSE_FLAGS%", "response_code_details": "%RESPONSE_CODE_DETAILS%",
	"connection_termination_details": "%CONNECTION_TERMINATION_DETAILS%", "bytes_received": "%BYTES_RECEIVED%",
	"bytes_sent": "%BYTES_SENT%", "duration": "%DURATION%", "upstream_service_time": "%RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)%",
	"x_forwarded_for": "%REQ(X-FORWARDED-FOR)%", "user_agent": "%REQ(USER-AGENT)%", "request_id": "%REQ(X-REQUEST-ID)%",
	"authority": "%REQ(:AUTHORITY)%", "upstream_host": "%UPSTREAM_HOST%", "upstream_cluster": "%UPSTREAM_CLUSTER_RAW%",
	"upstream_local_address": "%UPSTREAM_LOCAL_ADDRESS%", "downstream_local_address": "%DOWNSTREAM_LOCAL_ADDRESS%",
	"downstream_remote_address": "%DOWNSTREAM_REMOTE_ADDRESS%", "requested_server_name": "%REQUESTED_SERVER_NAME%",
	"upstream_transport_failure_reason": "%UPSTREAM_TRANSPORT_FAILURE_REASON%",
}

func istioJSONLogFormat() *structpb.Struct {
	s := &structpb.Struct{Fields: map[string]*structpb.Value{}}
	for k, v := range istioJSONLogFields {
		s.Fields[k] = structpb.NewStringValue(v)
	}
	return s
}

const (
	fileAccessLogName = "envoy.access_loggers.file"
	celFilterName     = "envoy.access_loggers.extension_filters.cel"
)

// accessLogsOf is a connection manager's (or tcp_proxy's) access logs:
// with no Telemetry access logging, the mesh's accessLogFile (in
// accessLogEncoding and accessLogFormat); else one per provider the
// Telemetry resolves to, each with its CEL filter.
func accessLogsOf(cfg *telemetry.Config, v *scope.View) []*accesslogv3.AccessLog {
	if cfg.Logging == nil {
		if f := cfg.Mesh.GetAccessLogFile(); f != "" {
			return []*accesslogv3.AccessLog{meshFileLog(f, cfg.Mesh)}
		}
		return nil
	}
	var out []*accesslogv3.AccessLog
	for _, l := range cfg.Logging {
		al := providerLog(l.Provider, cfg.Mesh, v)
		if al == nil {
			continue
		}
		if l.Filter != "" {
			al.Filter = &accesslogv3.AccessLogFilter{FilterSpecifier: &accesslogv3.AccessLogFilter_ExtensionFilter{ExtensionFilter: &accesslogv3.ExtensionFilter{
				Name: celFilterName, ConfigType: &accesslogv3.ExtensionFilter_TypedConfig{TypedConfig: gen.MustAny(&celv3.ExpressionFilter{Expression: l.Filter})},
			}}}
		}
		out = append(out, al)
	}
	return out
}

// meshFileLog is istiod's FileAccessLogFromMeshConfig.
func meshFileLog(path string, m *meshv1alpha1.MeshConfig) *accesslogv3.AccessLog {
	fl := &filev3.FileAccessLog{Path: path}
	switch m.GetAccessLogEncoding() {
	case meshv1alpha1.MeshConfig_JSON:
		js := istioJSONLogFormat()
		if f := m.GetAccessLogFormat(); f != "" {
			var parsed structpb.Struct
			if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal([]byte(f), &parsed); err == nil {
				js = &parsed
			}
		}
		fl.AccessLogFormat = jsonLogFormat(js, false)
	default:
		fl.AccessLogFormat = textLogFormat(m.GetAccessLogFormat(), false)
	}
	return &accesslogv3.AccessLog{Name: fileAccessLogName, ConfigType: &accesslogv3.AccessLog_TypedConfig{TypedConfig: gen.MustAny(fl)}}
}

func textLogFormat(format string, omitEmpty bool) *filev3.FileAccessLog_LogFormat {
	if format == "" {
		format = istioTextLogFormat
	} else if !strings.HasSuffix(format, "\n") {
		format += "\n"
	}
	return &filev3.FileAccessLog_LogFormat{LogFormat: &corev3.SubstitutionFormatString{
		Format:          &corev3.SubstitutionFormatString_TextFormatSource{TextFormatSource: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: format}}},
		OmitEmptyValues: omitEmpty,
	}}
}

func jsonLogFormat(s *structpb.Struct, omitEmpty bool) *filev3.FileAccessLog_LogFormat {
	if len(s.GetFields()) == 0 {
		s = istioJSONLogFormat()
	}
	return &filev3.FileAccessLog_LogFormat{LogFormat: &corev3.SubstitutionFormatString{
		Format: &corev3.SubstitutionFormatString_JsonFormat{JsonFormat: s},
		//lint:ignore SA1019 what istiod sets (telemetry_logging.go); parity
		JsonFormatOptions: &corev3.JsonFormatOptions{SortProperties: false},
		OmitEmptyValues:   omitEmpty,
	}}
}

// providerLog is the access log of one extension provider (Envoy's file
// access log, the OpenTelemetry access log service; other kinds are not
// configured: nil).
func providerLog(p *meshv1alpha1.MeshConfig_ExtensionProvider, m *meshv1alpha1.MeshConfig, v *scope.View) *accesslogv3.AccessLog {
	if o, ok := p.GetProvider().(*meshv1alpha1.MeshConfig_ExtensionProvider_EnvoyOtelAls); ok {
		return otelLog(o.EnvoyOtelAls, v)
	}
	x, ok := p.GetProvider().(*meshv1alpha1.MeshConfig_ExtensionProvider_EnvoyFileAccessLog)
	if !ok {
		return nil
	}
	f := x.EnvoyFileAccessLog
	// The built-in "envoy" provider without a format takes the mesh's.
	if p.GetName() == "envoy" && f.GetLogFormat() == nil && !f.GetOmitEmptyValues() {
		return meshFileLog(f.GetPath(), m)
	}
	fl := &filev3.FileAccessLog{Path: f.GetPath()}
	if lf := f.GetLogFormat(); lf != nil && lf.GetLabels() != nil {
		fl.AccessLogFormat = jsonLogFormat(lf.GetLabels(), f.GetOmitEmptyValues())
	} else {
		fl.AccessLogFormat = textLogFormat(lf.GetText(), f.GetOmitEmptyValues())
	}
	return &accesslogv3.AccessLog{Name: fileAccessLogName, ConfigType: &accesslogv3.AccessLog_TypedConfig{TypedConfig: gen.MustAny(fl)}}
}

// otelLog is istiod's OpenTelemetry access log: to the provider's service
// (a service of the mesh) over gRPC, the text format as the body, the
// labels as attributes, the peer metadata filter states logged; nil when
// the service is unknown.
func otelLog(p *meshv1alpha1.MeshConfig_ExtensionProvider_EnvoyOpenTelemetryLogProvider, v *scope.View) *accesslogv3.AccessLog {
	host, cluster, ok := lookupCluster(v, p.GetService(), p.GetPort())
	if !ok {
		return nil
	}
	name := p.GetLogName()
	if name == "" {
		name = "otel_envoy_accesslog"
	}
	format := istioTextLogFormat
	if t := p.GetLogFormat().GetText(); t != "" {
		format = t
	}
	cfg := &otelv3.OpenTelemetryAccessLogConfig{
		//lint:ignore SA1019 what istiod sets (telemetry_logging.go); parity
		CommonConfig: &grpcalv3.CommonGrpcAccessLogConfig{
			LogName: name,
			GrpcService: &corev3.GrpcService{TargetSpecifier: &corev3.GrpcService_EnvoyGrpc_{EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{
				ClusterName: cluster, Authority: host,
			}}},
			TransportApiVersion:     corev3.ApiVersion_V3,
			FilterStateObjectsToLog: []string{"upstream_peer", "downstream_peer", "wasm.upstream_peer", "wasm.upstream_peer_id", "wasm.downstream_peer", "wasm.downstream_peer_id"},
		},
		DisableBuiltinLabels: true,
		Body:                 &otlpcommon.AnyValue{Value: &otlpcommon.AnyValue_StringValue{StringValue: format}},
	}
	if labels := p.GetLogFormat().GetLabels().GetFields(); len(labels) > 0 {
		keys := make([]string, 0, len(labels))
		for k := range labels {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		cfg.Attributes = &otlpcommon.KeyValueList{}
		for _, k := range keys {
			cfg.Attributes.Values = append(cfg.Attributes.Values, &otlpcommon.KeyValue{Key: k, Value: &otlpcommon.AnyValue{Value: &otlpcommon.AnyValue_StringValue{StringValue: labels[k].GetStringValue()}}})
		}
	}
	return &accesslogv3.AccessLog{Name: "envoy.access_loggers.open_telemetry", ConfigType: &accesslogv3.AccessLog_TypedConfig{TypedConfig: gen.MustAny(cfg)}}
}
