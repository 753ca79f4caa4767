package telemetry

import (
	meshv1alpha1 "istio.io/api/mesh/v1alpha1"
	telemetryv1 "istio.io/api/telemetry/v1alpha1"
)

// resolveTracing merges the levels' tracing for mode, as istiod's
// Telemetries.Tracing: the mesh's default tracing providers, then each
// level's first matching entry overriding what it sets (providers,
// randomSamplingPercentage, disableSpanReporting, useRequestIdForTraceSampling,
// enableIstioTags; custom tags merged by name). nil when nothing sets
// tracing: the mesh config's legacy tracing applies.
func resolveTracing(m *meshv1alpha1.MeshConfig, levels []*telemetryv1.Telemetry, mode telemetryv1.WorkloadMode) *Tracing {
	providers := m.GetDefaultProviders().GetTracing()
	set := len(providers) > 0
	t := &Tracing{UseRequestIDForTraceSampling: true, EnableIstioTags: true, CustomTags: map[string]*telemetryv1.Tracing_CustomTag{}}
	for _, l := range levels {
		for _, tr := range l.GetTracing() {
			if !matches(tr.GetMatch(), mode) {
				continue
			}
			set = true
			if len(tr.GetProviders()) > 0 {
				providers = providerRefs(tr.GetProviders())
			}
			if p := tr.GetRandomSamplingPercentage(); p != nil {
				v := p.GetValue()
				t.Sampling = &v
			}
			if d := tr.GetDisableSpanReporting(); d != nil {
				t.Disabled = d.GetValue()
			}
			if u := tr.GetUseRequestIdForTraceSampling(); u != nil {
				t.UseRequestIDForTraceSampling = u.GetValue()
			}
			if e := tr.GetEnableIstioTags(); e != nil {
				t.EnableIstioTags = e.GetValue()
			}
			for k, v := range tr.GetCustomTags() {
				t.CustomTags[k] = v
			}
		}
	}
	if !set {
		return nil
	}
	// One tracer per proxy: the first provider the mesh defines.
	for _, name := range providers {
		if p := Provider(m, name); p != nil {
			t.Provider = p
			break
		}
	}
	return t
}

// resolveLogging merges the levels' access logging for mode, as istiod's
// Telemetries.AccessLogging: the mesh's default access log providers,
// then per level the matching entries: providers replace the set,
// disabled turns every provider of the set off (or on again), the filter
// applies to the set. nil when nothing sets access logging: the mesh
// config's accessLogFile applies.
func resolveLogging(m *meshv1alpha1.MeshConfig, levels []*telemetryv1.Telemetry, mode telemetryv1.WorkloadMode) []AccessLog {
	providers := m.GetDefaultProviders().GetAccessLogging()
	set := len(providers) > 0
	disabled := false
	filter := map[string]string{}
	for _, l := range levels {
		for _, al := range l.GetAccessLogging() {
			if !matches(al.GetMatch(), mode) {
				continue
			}
			set = true
			names := providers
			if len(al.GetProviders()) > 0 {
				names = providerRefs(al.GetProviders())
				providers = names
			}
			if d := al.GetDisabled(); d != nil {
				disabled = d.GetValue()
			}
			if f := al.GetFilter(); f != nil {
				for _, n := range names {
					filter[n] = f.GetExpression()
				}
			}
		}
	}
	if !set {
		return nil
	}
	out := []AccessLog{}
	if disabled {
		return out
	}
	for _, n := range providers {
		if p := Provider(m, n); p != nil {
			out = append(out, AccessLog{Provider: p, Filter: filter[n]})
		}
	}
	return out
}

// resolveMetrics merges the levels' metrics for mode, as istiod's
// Telemetries metrics: the mesh's default metrics providers, then per
// level providers replace the set and overrides add up (a later level's
// override of the same metric and mode wins, as it comes later).
func resolveMetrics(m *meshv1alpha1.MeshConfig, levels []*telemetryv1.Telemetry, mode telemetryv1.WorkloadMode) []Metrics {
	providers := m.GetDefaultProviders().GetMetrics()
	var overrides []*telemetryv1.MetricsOverrides
	var interval float64
	for _, l := range levels {
		for _, mt := range l.GetMetrics() {
			if len(mt.GetProviders()) > 0 {
				providers = providerRefs(mt.GetProviders())
			}
			for _, o := range mt.GetOverrides() {
				if o.GetMatch() != nil && o.GetMatch().GetMode() != telemetryv1.WorkloadMode_CLIENT_AND_SERVER && o.GetMatch().GetMode() != mode {
					continue
				}
				overrides = append(overrides, o)
			}
			if ri := mt.GetReportingInterval(); ri != nil {
				interval = ri.AsDuration().Seconds()
			}
		}
	}
	var out []Metrics
	for _, n := range providers {
		if p := Provider(m, n); p != nil {
			out = append(out, Metrics{Provider: p, Overrides: overrides, ReportingSeconds: interval})
		}
	}
	return out
}
