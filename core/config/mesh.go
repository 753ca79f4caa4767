package config

// The mesh config: Istio's defaults, and a YAML file applied on top of
// them with Istio's semantics (istio/istio pkg/config/mesh/mesh.go).

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	meshv1alpha1 "istio.io/api/mesh/v1alpha1"
	networking "istio.io/api/networking/v1alpha3"
	"sigs.k8s.io/yaml"
)

// DefaultProxyConfig returns Istio's default ProxyConfig, the
// meshConfig.defaultConfig of a standard install. Each call returns a new
// value the caller may alter.
func DefaultProxyConfig() *meshv1alpha1.ProxyConfig {
	return &meshv1alpha1.ProxyConfig{
		ConfigPath:               "./etc/istio/proxy",
		BinaryPath:               "/usr/local/bin/envoy",
		ClusterName:              &meshv1alpha1.ProxyConfig_ServiceCluster{ServiceCluster: "istio-proxy"},
		DrainDuration:            durationpb.New(45 * time.Second),
		TerminationDrainDuration: durationpb.New(5 * time.Second),
		ProxyAdminPort:           15000,
		ControlPlaneAuthPolicy:   meshv1alpha1.AuthenticationPolicy_MUTUAL_TLS,
		DiscoveryAddress:         "istiod.istio-system.svc:15012",
		Tracing: &meshv1alpha1.Tracing{
			Tracer: &meshv1alpha1.Tracing_Zipkin_{Zipkin: &meshv1alpha1.Tracing_Zipkin{Address: "zipkin.istio-system:9411"}},
		},
		StatNameLength: 189,
		StatusPort:     15020,
	}
}

// DefaultMeshConfig returns Istio's default mesh config. Each call
// returns a new value the caller may alter.
func DefaultMeshConfig() *meshv1alpha1.MeshConfig {
	return &meshv1alpha1.MeshConfig{
		EnableTracing:            true,
		AccessLogEncoding:        meshv1alpha1.MeshConfig_TEXT,
		ProtocolDetectionTimeout: durationpb.New(0),
		IngressService:           "istio-ingressgateway",
		IngressControllerMode:    meshv1alpha1.MeshConfig_STRICT,
		IngressClass:             "istio",
		TrustDomain:              "cluster.local",
		TrustDomainAliases:       []string{},
		EnableAutoMtls:           wrapperspb.Bool(true),
		OutboundTrafficPolicy:    &meshv1alpha1.MeshConfig_OutboundTrafficPolicy{Mode: meshv1alpha1.MeshConfig_OutboundTrafficPolicy_ALLOW_ANY},
		InboundTrafficPolicy:     &meshv1alpha1.MeshConfig_InboundTrafficPolicy{Mode: meshv1alpha1.MeshConfig_InboundTrafficPolicy_PASSTHROUGH},
		LocalityLbSetting:        &networking.LocalityLoadBalancerSetting{Enabled: wrapperspb.Bool(true)},
		//lint:ignore SA1019 Istio's default mesh config sets it, as istiod's DefaultMeshConfig
		Certificates:  []*meshv1alpha1.Certificate{},
		DefaultConfig: DefaultProxyConfig(),

		RootNamespace:                  "istio-system",
		ProxyListenPort:                15001,
		ProxyInboundListenPort:         15006,
		ConnectTimeout:                 durationpb.New(10 * time.Second),
		DefaultServiceExportTo:         []string{"*"},
		DefaultVirtualServiceExportTo:  []string{"*"},
		DefaultDestinationRuleExportTo: []string{"*"},
		// Used only when a DNS query fails; answers use their TTL.
		DnsRefreshRate:  durationpb.New(60 * time.Second),
		ServiceSettings: []*meshv1alpha1.MeshConfig_ServiceSettings{},

		EnablePrometheusMerge: wrapperspb.Bool(true),
		DefaultProviders:      &meshv1alpha1.MeshConfig_DefaultProviders{},
		ExtensionProviders: []*meshv1alpha1.MeshConfig_ExtensionProvider{
			{Name: "prometheus", Provider: &meshv1alpha1.MeshConfig_ExtensionProvider_Prometheus{
				Prometheus: &meshv1alpha1.MeshConfig_ExtensionProvider_PrometheusMetricsProvider{},
			}},
			{Name: "stackdriver", Provider: &meshv1alpha1.MeshConfig_ExtensionProvider_Stackdriver{
				Stackdriver: &meshv1alpha1.MeshConfig_ExtensionProvider_StackdriverProvider{},
			}},
			{Name: "envoy", Provider: &meshv1alpha1.MeshConfig_ExtensionProvider_EnvoyFileAccessLog{
				EnvoyFileAccessLog: &meshv1alpha1.MeshConfig_ExtensionProvider_EnvoyFileAccessLogProvider{Path: "/dev/stdout"},
			}},
		},
	}
}

// LoadMeshConfig reads the mesh config file at path. A missing file is
// not an error: the mesh runs with the defaults.
func LoadMeshConfig(path string) (*meshv1alpha1.MeshConfig, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return DefaultMeshConfig(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("mesh config: %w", err)
	}
	return ParseMeshConfig(data, path)
}

var yamlLineRE = regexp.MustCompile(`line (\d+)`)
var unknownFieldRE = regexp.MustCompile(`unknown field "([^"]+)"`)

// ParseMeshConfig applies the YAML in data on top of DefaultMeshConfig, as
// istiod does: a field the file gives replaces the default, messages
// (defaultConfig, outboundTrafficPolicy, …) are merged into their
// defaults field by field, extensionProviders are merged by name and
// trustDomainAliases added. The result is validated. Errors are *DocError
// naming file (and the line when known) and wrap ErrParse or ErrInvalid.
func ParseMeshConfig(data []byte, file string) (*meshv1alpha1.MeshConfig, error) {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		line := 0
		if m := yamlLineRE.FindStringSubmatch(err.Error()); m != nil {
			line, _ = strconv.Atoi(m[1])
		}
		return nil, &DocError{File: file, Line: line, Err: fmt.Errorf("%w: %v", ErrParse, err)}
	}
	var top map[string]json.RawMessage
	if t := bytes.TrimSpace(js); len(t) > 0 && !bytes.Equal(t, []byte("null")) {
		if err := json.Unmarshal(js, &top); err != nil {
			return nil, &DocError{File: file, Err: fmt.Errorf("%w: mesh config must be a mapping", ErrParse)}
		}
	}
	out := DefaultMeshConfig()
	if len(top) > 0 {
		user := &meshv1alpha1.MeshConfig{}
		var generic any
		if err := json.Unmarshal(js, &generic); err == nil {
			if b, err := json.Marshal(goDurations(generic, user.ProtoReflect().Descriptor())); err == nil {
				js = b
			}
		}
		if err := protojson.Unmarshal(js, user); err != nil {
			msg := cleanProtoJSONError(err)
			line := 0
			if m := unknownFieldRE.FindStringSubmatch(msg); m != nil {
				line = lineOfKey(data, m[1])
			}
			return nil, &DocError{File: file, Line: line, Err: fmt.Errorf("%w: %s", ErrInvalid, msg)}
		}
		applyMesh(out, user, top)
	}
	if err := validateMeshConfig(out).Err(); err != nil {
		return nil, &DocError{File: file, Err: err}
	}
	return out, nil
}

// applyMesh merges user into out: top (the document's top-level keys)
// says which fields the file gives. See mergeFields; extensionProviders
// are then merged by name and trustDomainAliases added to the defaults,
// as istiod does.
func applyMesh(out, user *meshv1alpha1.MeshConfig, top map[string]json.RawMessage) {
	defaults := DefaultMeshConfig()
	mergeFields(out.ProtoReflect(), user.ProtoReflect(), top)
	if _, ok := lookupKey(top, "extensionProviders", "extension_providers"); ok {
		names := map[string]bool{}
		for _, p := range out.ExtensionProviders {
			names[p.GetName()] = true
		}
		for _, p := range defaults.GetExtensionProviders() {
			if !names[p.GetName()] {
				out.ExtensionProviders = append(out.ExtensionProviders, p)
			}
		}
	}
	aliases := slices.Concat(defaults.GetTrustDomainAliases(), out.GetTrustDomainAliases())
	slices.Sort(aliases)
	out.TrustDomainAliases = slices.Compact(aliases)
}

// mergeFields applies to dst the fields of src that keys names (by JSON or
// proto name). A scalar, list or map given replaces the default, even
// with a zero value; a message given is merged field by field into the
// default (so "defaultConfig: {proxyAdminPort: 15001}" keeps the other
// proxy defaults); a field given as null is cleared. dst may share
// memory with src afterwards.
func mergeFields(dst, src protoreflect.Message, keys map[string]json.RawMessage) {
	fields := dst.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		raw, ok := lookupKey(keys, fd.JSONName(), string(fd.Name()))
		if !ok {
			continue
		}
		if !src.Has(fd) {
			dst.Clear(fd)
			continue
		}
		md := fd.Message()
		if md != nil && !fd.IsList() && !fd.IsMap() && dst.Has(fd) &&
			!strings.HasPrefix(string(md.FullName()), "google.protobuf.") {
			if sub := objectKeys(raw); sub != nil {
				mergeFields(dst.Mutable(fd).Message(), src.Get(fd).Message(), sub)
				continue
			}
		}
		dst.Set(fd, src.Get(fd))
	}
}

func lookupKey(m map[string]json.RawMessage, names ...string) (json.RawMessage, bool) {
	for _, n := range names {
		if v, ok := m[n]; ok {
			return v, true
		}
	}
	return nil, false
}

func objectKeys(raw json.RawMessage) map[string]json.RawMessage {
	var m map[string]json.RawMessage
	_ = json.Unmarshal(raw, &m) // not an object: protojson has already failed
	return m
}

// lineOfKey finds the 1-based line where key is first written as a YAML
// key, or 0.
func lineOfKey(data []byte, key string) int {
	re := regexp.MustCompile(`^\s*(- )?["']?` + regexp.QuoteMeta(key) + `["']?\s*:`)
	for i, l := range bytes.Split(data, []byte("\n")) {
		if re.Match(l) {
			return i + 1
		}
	}
	return 0
}
