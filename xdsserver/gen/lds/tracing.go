package lds

import (
	"net/url"
	"sort"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tracev3 "github.com/envoyproxy/go-control-plane/envoy/config/trace/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	metadatav3 "github.com/envoyproxy/go-control-plane/envoy/type/metadata/v3"
	tracingv3 "github.com/envoyproxy/go-control-plane/envoy/type/tracing/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	meshv1alpha1 "istio.io/api/mesh/v1alpha1"
	telemetryv1 "istio.io/api/telemetry/v1alpha1"

	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/scope"
	"github.com/baremesh/baremesh/xdsserver/gen/telemetry"
)

// tracingOf is a connection manager's tracing, as istiod's
// configureTracing: with no Telemetry tracing, the mesh's enableTracing
// gives sampling (defaultConfig.tracing.sampling, else 1%) and Istio's
// tags, the tracer being the bootstrap's; with one, its provider (Zipkin
// or OpenTelemetry, a cluster of the mesh), sampling and tags. nil: none.
func tracingOf(cfg *telemetry.Config, v *scope.View) *hcmv3.HttpConnectionManager_Tracing {
	pc := cfg.Mesh.GetDefaultConfig()
	if cfg.Tracing == nil {
		if !cfg.Mesh.GetEnableTracing() {
			return nil
		}
		t := &hcmv3.HttpConnectionManager_Tracing{}
		sampling(t, legacySampling(pc))
		t.CustomTags = customTags(v, nil, pc, true)
		if n := pc.GetTracing().GetMaxPathTagLength(); n != 0 {
			t.MaxPathTagLength = wrapperspb.UInt32(n)
		}
		return t
	}
	spec := cfg.Tracing
	if spec.Disabled { // also: no provider resolved
		return nil
	}
	t, ok := tracerOf(spec.Provider, v)
	if !ok {
		return nil // istiod configures no tracing when the provider's cluster is unknown
	}
	s := legacySampling(pc)
	if spec.Sampling != nil {
		s = *spec.Sampling
	}
	sampling(t, s)
	t.CustomTags = customTags(v, spec.CustomTags, pc, spec.EnableIstioTags)
	if t.MaxPathTagLength == nil && pc.GetTracing().GetMaxPathTagLength() != 0 {
		t.MaxPathTagLength = wrapperspb.UInt32(pc.GetTracing().GetMaxPathTagLength())
	}
	// As istiod: only for a proxy of Istio 1.30 or later (older Envoys
	// do not know the field).
	if spec.DisableContextPropagation && gen.IstioAtLeast(v.Proxy, 1, 30) {
		t.NoContextPropagation = true
	}
	return t
}

// legacySampling is defaultConfig.tracing.sampling, else istiod's
// PILOT_TRACE_SAMPLING default (1%); above 100 it is 1%.
func legacySampling(pc *meshv1alpha1.ProxyConfig) float64 {
	s := 1.0
	if v := pc.GetTracing().GetSampling(); v != 0 {
		s = v
		if s > 100 {
			s = 1
		}
	}
	return s
}

func sampling(t *hcmv3.HttpConnectionManager_Tracing, random float64) {
	t.ClientSampling = &typev3.Percent{Value: 100}
	t.OverallSampling = &typev3.Percent{Value: 100}
	t.RandomSampling = &typev3.Percent{Value: random}
}

// tracerOf is the provider part of the tracing: the tracer's config
// reporting to the provider's service (a service of the mesh, "host" or
// "namespace/host"). ok is false when the service is unknown.
func tracerOf(p *meshv1alpha1.MeshConfig_ExtensionProvider, v *scope.View) (*hcmv3.HttpConnectionManager_Tracing, bool) {
	t := &hcmv3.HttpConnectionManager_Tracing{}
	if v.Proxy.Type == model.Router {
		t.SpawnUpstreamSpan = wrapperspb.Bool(true)
	}
	var name string
	var cfg proto.Message
	var maxTag uint32
	switch x := p.GetProvider().(type) {
	case *meshv1alpha1.MeshConfig_ExtensionProvider_Zipkin:
		host, cluster, ok := lookupCluster(v, x.Zipkin.GetService(), x.Zipkin.GetPort())
		if !ok {
			return nil, false
		}
		path := x.Zipkin.GetPath()
		if path == "" {
			path = "/api/v2/spans"
		}
		timeout := x.Zipkin.GetTimeout()
		if timeout == nil {
			timeout = durationpb.New(5 * time.Second)
		}
		name, maxTag = "envoy.tracers.zipkin", x.Zipkin.GetMaxTagLength()
		cfg = &tracev3.ZipkinConfig{
			CollectorEndpointVersion: tracev3.ZipkinConfig_HTTP_JSON,
			TraceId_128Bit:           !x.Zipkin.GetEnable_64BitTraceId(),
			SharedSpanContext:        wrapperspb.Bool(false),
			CollectorService: &corev3.HttpService{HttpUri: &corev3.HttpUri{
				Uri: "http://" + host + path, HttpUpstreamType: &corev3.HttpUri_Cluster{Cluster: cluster}, Timeout: timeout,
			}, RequestHeadersToAdd: httpHeaders(x.Zipkin.GetHeaders())},
			TraceContextOption: tracev3.ZipkinConfig_TraceContextOption(x.Zipkin.GetTraceContextOption()),
		}
	case *meshv1alpha1.MeshConfig_ExtensionProvider_Opentelemetry:
		o := x.Opentelemetry
		host, cluster, ok := lookupCluster(v, o.GetService(), o.GetPort())
		if !ok {
			return nil, false
		}
		name, maxTag = "envoy.tracers.opentelemetry", o.GetMaxTagLength()
		oc := &tracev3.OpenTelemetryConfig{ServiceName: v.Proxy.ServiceCluster}
		if h := o.GetHttp(); h != nil {
			u, err := url.JoinPath(host, h.GetPath())
			if err != nil {
				return nil, false
			}
			oc.HttpService = &corev3.HttpService{HttpUri: &corev3.HttpUri{
				Uri: u, HttpUpstreamType: &corev3.HttpUri_Cluster{Cluster: cluster}, Timeout: h.GetTimeout(),
			}, RequestHeadersToAdd: httpHeaders(h.GetHeaders())}
		} else {
			oc.GrpcService = &corev3.GrpcService{
				TargetSpecifier: &corev3.GrpcService_EnvoyGrpc_{EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: cluster, Authority: host}},
				Timeout:         o.GetGrpc().GetTimeout(),
			}
			for _, md := range o.GetGrpc().GetInitialMetadata() {
				oc.GrpcService.InitialMetadata = append(oc.GrpcService.InitialMetadata, &corev3.HeaderValue{Key: md.GetName(), Value: md.GetValue()})
			}
		}
		cfg = oc
	default:
		return nil, false // not a tracer baremesh configures
	}
	t.Provider = &tracev3.Tracing_Http{Name: name, ConfigType: &tracev3.Tracing_Http_TypedConfig{TypedConfig: gen.MustAny(cfg)}}
	if maxTag != 0 {
		t.MaxPathTagLength = wrapperspb.UInt32(maxTag)
	}
	return t, true
}

func httpHeaders(hs []*meshv1alpha1.MeshConfig_ExtensionProvider_HttpHeader) []*corev3.HeaderValueOption {
	var out []*corev3.HeaderValueOption
	for _, h := range hs {
		out = append(out, &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: h.GetName(), Value: h.GetValue()}, AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD})
	}
	return out
}

// lookupCluster finds a provider's service as istiod's LookupCluster:
// "namespace/host", or a host only one namespace defines; the cluster is
// its outbound cluster of port.
func lookupCluster(v *scope.View, service string, port uint32) (host, cluster string, ok bool) {
	if service == "" {
		return "", "", false
	}
	if ns, h, found := strings.Cut(service, "/"); found {
		if s := v.Push.Service(h, ns); s != nil {
			return h, gen.ClusterName(gen.Outbound, port, "", h), true
		}
		return "", "", false
	}
	nss := map[string]bool{}
	for _, s := range v.Push.ServicesByHost(service) {
		nss[s.Namespace] = true
	}
	if len(nss) != 1 {
		return "", "", false
	}
	return service, gen.ClusterName(gen.Outbound, port, "", service), true
}

// customTags are istiod's tracing tags: Istio's own (canonical service
// and revision, mesh, namespace, cluster; the dry-run RBAC results) unless
// disabled, then the Telemetry's tags, else defaultConfig.tracing's; by
// name.
func customTags(v *scope.View, tel map[string]*telemetryv1.Tracing_CustomTag, pc *meshv1alpha1.ProxyConfig, istioTags bool) []*tracingv3.CustomTag {
	var tags []*tracingv3.CustomTag
	if tel == nil {
		if e := pc.GetTracing().GetEnableIstioTags(); e != nil {
			istioTags = e.GetValue()
		}
	}
	if istioTags {
		tags = append(tags, serviceTags(v)...)
		tags = append(tags, dryRunTags...)
	}
	if len(tel) == 0 {
		for name, t := range pc.GetTracing().GetCustomTags() {
			switch x := t.GetType().(type) {
			case *meshv1alpha1.Tracing_CustomTag_Literal:
				tags = append(tags, literalTag(name, x.Literal.GetValue()))
			case *meshv1alpha1.Tracing_CustomTag_Environment:
				tags = append(tags, &tracingv3.CustomTag{Tag: name, Type: &tracingv3.CustomTag_Environment_{Environment: &tracingv3.CustomTag_Environment{Name: x.Environment.GetName(), DefaultValue: x.Environment.GetDefaultValue()}}})
			case *meshv1alpha1.Tracing_CustomTag_Header:
				tags = append(tags, &tracingv3.CustomTag{Tag: name, Type: &tracingv3.CustomTag_RequestHeader{RequestHeader: &tracingv3.CustomTag_Header{Name: x.Header.GetName(), DefaultValue: x.Header.GetDefaultValue()}}})
			}
		}
	} else {
		for name, t := range tel {
			switch x := t.GetType().(type) {
			case *telemetryv1.Tracing_CustomTag_Literal:
				tags = append(tags, literalTag(name, x.Literal.GetValue()))
			case *telemetryv1.Tracing_CustomTag_Environment:
				tags = append(tags, &tracingv3.CustomTag{Tag: name, Type: &tracingv3.CustomTag_Environment_{Environment: &tracingv3.CustomTag_Environment{Name: x.Environment.GetName(), DefaultValue: x.Environment.GetDefaultValue()}}})
			case *telemetryv1.Tracing_CustomTag_Header:
				tags = append(tags, &tracingv3.CustomTag{Tag: name, Type: &tracingv3.CustomTag_RequestHeader{RequestHeader: &tracingv3.CustomTag_Header{Name: x.Header.GetName(), DefaultValue: x.Header.GetDefaultValue()}}})
			case *telemetryv1.Tracing_CustomTag_Formatter:
				// A substitution format string (Envoy's value tag), for a
				// proxy of Istio 1.29 or later, as istiod.
				if gen.IstioAtLeast(v.Proxy, 1, 29) {
					tags = append(tags, &tracingv3.CustomTag{Tag: name, Type: &tracingv3.CustomTag_Value{Value: x.Formatter.GetValue()}})
				}
			}
		}
	}
	sort.SliceStable(tags, func(i, j int) bool { return tags[i].Tag < tags[j].Tag })
	return tags
}

// serviceTags are Istio's literal tags naming the proxy.
func serviceTags(v *scope.View) []*tracingv3.CustomTag {
	p := v.Proxy
	or := func(s, d string) string {
		if s == "" {
			return d
		}
		return s
	}
	return []*tracingv3.CustomTag{
		literalTag("istio.canonical_revision", or(p.Labels["service.istio.io/canonical-revision"], "latest")),
		literalTag("istio.canonical_service", or(p.Labels["service.istio.io/canonical-name"], "unknown")),
		literalTag("istio.mesh_id", or(p.MeshID, "unknown")),
		literalTag("istio.namespace", or(p.Namespace, "default")),
		literalTag("istio.cluster_id", or(p.ClusterID, "unknown")),
	}
}

func literalTag(name, value string) *tracingv3.CustomTag {
	return &tracingv3.CustomTag{Tag: name, Type: &tracingv3.CustomTag_Literal_{Literal: &tracingv3.CustomTag_Literal{Value: value}}}
}

// dryRunTags read the dry-run RBAC results from request metadata
// (shared, never altered).
var dryRunTags = []*tracingv3.CustomTag{
	dryRunTag("istio.authorization.dry_run.allow_policy.name", "istio_dry_run_allow_shadow_effective_policy_id"),
	dryRunTag("istio.authorization.dry_run.allow_policy.result", "istio_dry_run_allow_shadow_engine_result"),
	dryRunTag("istio.authorization.dry_run.deny_policy.name", "istio_dry_run_deny_shadow_effective_policy_id"),
	dryRunTag("istio.authorization.dry_run.deny_policy.result", "istio_dry_run_deny_shadow_engine_result"),
}

func dryRunTag(name, key string) *tracingv3.CustomTag {
	return &tracingv3.CustomTag{Tag: name, Type: &tracingv3.CustomTag_Metadata_{Metadata: &tracingv3.CustomTag_Metadata{
		Kind: &metadatav3.MetadataKind{Kind: &metadatav3.MetadataKind_Request_{Request: &metadatav3.MetadataKind_Request{}}},
		MetadataKey: &metadatav3.MetadataKey{Key: "envoy.filters.http.rbac", Path: []*metadatav3.MetadataKey_PathSegment{
			{Segment: &metadatav3.MetadataKey_PathSegment_Key{Key: key}},
		}},
	}}}
}
