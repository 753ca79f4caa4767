// Package telemetry resolves what Istio's Telemetry API and the mesh
// config's telemetry settings (accessLogFile, accessLogFormat,
// accessLogEncoding, enableTracing, defaultConfig.tracing,
// extensionProviders, defaultProviders) ask of one proxy on one side of
// its traffic: the access logs, the tracing and the metrics providers, as
// istiod's Telemetries (pilot/pkg/model/telemetry.go) resolves them.
//
// Precedence, as Istio's: a Telemetry in the mesh's root namespace without
// selector applies mesh-wide; one in the proxy's namespace without
// selector overrides it; one there whose selector matches the proxy's
// labels overrides both. Each level overrides only what it sets. With no
// Telemetry for an aspect (and no default provider), the mesh config's
// legacy fields decide.
//
// It is pure (snapshot and proxy in, a Config out) and imports core and
// xdsserver/gen only.
package telemetry

import (
	"sort"

	meshv1alpha1 "istio.io/api/mesh/v1alpha1"
	telemetryv1 "istio.io/api/telemetry/v1alpha1"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/core/push"
	"github.com/baremesh/baremesh/xdsserver/gen/scope"
)

// Class is the side of the traffic a listener serves.
type Class uint8

// Classes: a sidecar's outbound (client) side, its inbound (server) side,
// a gateway (client side for Telemetry's match mode).
const (
	ClientSide Class = iota
	ServerSide
	Gateway
)

// Config is the resolved telemetry of one proxy and class.
type Config struct {
	Mesh *meshv1alpha1.MeshConfig
	// Tracing is nil when no Telemetry sets tracing: the mesh config's
	// enableTracing and defaultConfig.tracing decide (legacy).
	Tracing *Tracing
	// Logging is nil when no Telemetry sets access logging: the mesh
	// config's accessLogFile decides (legacy). Otherwise the providers to
	// log to (empty: none).
	Logging []AccessLog
	// Metrics are the metrics providers with their overrides for Mode
	// (empty: no stats filter).
	Metrics []Metrics
	// Mode is the side the metrics are for (CLIENT or SERVER).
	Mode telemetryv1.WorkloadMode
}

// Tracing is the tracing a Telemetry resolves to.
type Tracing struct {
	// Provider is the mesh's extension provider to report to; nil when
	// none resolves.
	Provider *meshv1alpha1.MeshConfig_ExtensionProvider
	// Sampling is randomSamplingPercentage, nil when unset.
	Sampling *float64
	// Disabled: disableSpanReporting.
	Disabled bool
	// CustomTags by name.
	CustomTags map[string]*telemetryv1.Tracing_CustomTag
	// UseRequestIDForTraceSampling from the Telemetry (default true).
	UseRequestIDForTraceSampling bool
	// EnableIstioTags (default true).
	EnableIstioTags bool
	// DisableContextPropagation: the proxy neither reads nor writes
	// trace context headers (Envoy's no_context_propagation).
	DisableContextPropagation bool
}

// AccessLog is one access log provider with its filter.
type AccessLog struct {
	Provider *meshv1alpha1.MeshConfig_ExtensionProvider
	// Filter is a CEL expression; "" logs everything.
	Filter string
}

// For resolves the telemetry of p on class's side from the snapshot.
func For(pc *push.PushContext, p *model.Proxy, class Class) *Config {
	out := &Config{Mesh: pc.Mesh}
	levels := Levels(pc, p.Namespace, p.Labels)
	mode := telemetryv1.WorkloadMode_CLIENT
	if class == ServerSide {
		mode = telemetryv1.WorkloadMode_SERVER
	}
	out.Tracing = resolveTracing(pc.Mesh, levels, mode)
	out.Logging = resolveLogging(pc.Mesh, levels, mode)
	out.Metrics = resolveMetrics(pc.Mesh, levels, mode)
	out.Mode = mode
	return out
}

// Levels are the Telemetry resources that apply to a workload of ns with
// labels, least specific first: the root namespace's, the namespace's,
// the workload's (each at most one; of two at one level the oldest, then
// the first by name, wins, as istiod picks; the other is a problem).
func Levels(pc *push.PushContext, ns string, labels map[string]string) []*telemetryv1.Telemetry {
	root := scope.RootNamespace(pc)
	var out []*telemetryv1.Telemetry
	if t := pick(pc, root, nil); t != nil {
		out = append(out, t)
	}
	if ns != root {
		if t := pick(pc, ns, nil); t != nil {
			out = append(out, t)
		}
	}
	if t := pick(pc, ns, labels); t != nil {
		out = append(out, t)
	}
	return out
}

// pick is the Telemetry of ns at one level: without selector (labels nil)
// or with a selector matching labels.
func pick(pc *push.PushContext, ns string, labels map[string]string) *telemetryv1.Telemetry {
	var cands []config.Config
	for _, c := range pc.ConfigsIn(config.Telemetry, ns) {
		t, ok := c.Spec.(*telemetryv1.Telemetry)
		if !ok || len(t.GetTargetRefs()) > 0 || t.GetTargetRef() != nil {
			continue
		}
		sel := t.GetSelector().GetMatchLabels()
		if labels == nil {
			if len(sel) == 0 {
				cands = append(cands, c)
			}
			continue
		}
		if len(sel) > 0 && scope.LabelsMatch(sel, labels) {
			cands = append(cands, c)
		}
	}
	if len(cands) == 0 {
		return nil
	}
	sort.SliceStable(cands, func(i, j int) bool {
		if !cands[i].CreationTime.Equal(cands[j].CreationTime) {
			return cands[i].CreationTime.Before(cands[j].CreationTime)
		}
		return cands[i].Name < cands[j].Name
	})
	return cands[0].Spec.(*telemetryv1.Telemetry)
}

// Provider is the mesh's extension provider named name, nil if none.
func Provider(m *meshv1alpha1.MeshConfig, name string) *meshv1alpha1.MeshConfig_ExtensionProvider {
	for _, p := range m.GetExtensionProviders() {
		if p.GetName() == name {
			return p
		}
	}
	return nil
}

// matches says whether a Telemetry entry's match applies to mode.
func matches(m interface {
	GetMode() telemetryv1.WorkloadMode
}, mode telemetryv1.WorkloadMode) bool {
	got := m.GetMode() // nil-safe getter: a nil selector is CLIENT_AND_SERVER
	return got == telemetryv1.WorkloadMode_CLIENT_AND_SERVER || got == mode
}

func providerRefs(refs []*telemetryv1.ProviderRef) []string {
	out := make([]string, 0, len(refs))
	for _, r := range refs {
		out = append(out, r.GetName())
	}
	return out
}
