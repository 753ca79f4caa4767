package telemetry

import (
	"sort"

	"google.golang.org/protobuf/types/known/durationpb"
	meshv1alpha1 "istio.io/api/mesh/v1alpha1"
	telemetryv1 "istio.io/api/telemetry/v1alpha1"
)

// Metrics is one metrics provider's settings for one side.
type Metrics struct {
	Provider *meshv1alpha1.MeshConfig_ExtensionProvider
	// Disabled: every metric is off on this side.
	Disabled bool
	// Overrides by metric name.
	Overrides []Override
	// ReportingInterval is the Telemetry's reportingInterval, nil unset.
	ReportingInterval *durationpb.Duration
}

// Override is one metric's override.
type Override struct {
	Name     string // Istio's metric name (REQUEST_COUNT) or a custom one
	Disabled bool
	Tags     []Tag // by name
}

// Tag is a tag override: a CEL value, or removed.
type Tag struct {
	Name, Value string
	Remove      bool
}

// allMetrics are Istio's metrics ALL_METRICS stands for, by name.
var allMetrics = func() []string {
	var out []string
	for name, v := range telemetryv1.MetricSelector_IstioMetric_value {
		if v != int32(telemetryv1.MetricSelector_ALL_METRICS) {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}()

type metricOverride struct {
	disabled *bool
	tags     map[string]*telemetryv1.MetricsOverrides_TagOverride
}

// resolveMetrics merges the levels' metrics as istiod's mergeMetrics: the
// providers of the most specific level that names some (else the mesh's
// default metrics providers); each level's overrides apply per side
// (CLIENT, SERVER) in order, an ALL_METRICS disabled override turning
// the side off until a later override of that side.
func resolveMetrics(m *meshv1alpha1.MeshConfig, levels []*telemetryv1.Telemetry, mode telemetryv1.WorkloadMode) []Metrics {
	var metrics []*telemetryv1.Metrics
	for _, l := range levels {
		metrics = append(metrics, l.GetMetrics()...)
	}
	type modes map[telemetryv1.WorkloadMode]map[string]metricOverride
	providers := map[string]modes{}
	if len(metrics) == 0 {
		for _, p := range m.GetDefaultProviders().GetMetrics() {
			providers[p] = modes{}
		}
	}
	names := m.GetDefaultProviders().GetMetrics()
	for _, mt := range metrics {
		if n := providerRefs(mt.GetProviders()); len(n) > 0 {
			names = n
		}
	}
	inScope := map[string]bool{}
	for _, n := range names {
		inScope[n] = true
	}
	parent := m.GetDefaultProviders().GetMetrics()
	disabledAll := map[string]bool{}
	intervals := map[string]*durationpb.Duration{}
	for _, mt := range metrics {
		pn := providerRefs(mt.GetProviders())
		if len(pn) == 0 {
			pn = parent
		}
		parent = pn
		for _, p := range pn {
			if !inScope[p] {
				continue
			}
			if ri := mt.GetReportingInterval(); ri != nil {
				intervals[p] = ri
			}
			if _, ok := providers[p]; !ok {
				providers[p] = modes{telemetryv1.WorkloadMode_CLIENT: {}, telemetryv1.WorkloadMode_SERVER: {}}
			}
			mp := providers[p]
			for _, o := range mt.GetOverrides() {
				if allMetricsMatch(o.GetMatch()) && o.GetDisabled().GetValue() {
					for _, md := range sides(o.GetMatch().GetMode()) {
						disabledAll[p+"/"+md.String()] = true
					}
					continue
				}
				for _, md := range sides(o.GetMatch().GetMode()) {
					delete(disabledAll, p+"/"+md.String())
					if mp[md] == nil {
						mp[md] = map[string]metricOverride{}
					}
					for _, name := range metricNames(o.GetMatch()) {
						ov := mp[md][name]
						if d := o.GetDisabled(); d != nil {
							v := d.GetValue()
							ov.disabled = &v
						}
						for k, t := range o.GetTagOverrides() {
							if ov.tags == nil {
								ov.tags = map[string]*telemetryv1.MetricsOverrides_TagOverride{}
							}
							ov.tags[k] = t
						}
						mp[md][name] = ov
					}
				}
			}
		}
	}
	pnames := make([]string, 0, len(providers))
	for p := range providers {
		pnames = append(pnames, p)
	}
	sort.Strings(pnames)
	var out []Metrics
	for _, name := range pnames {
		prov := Provider(m, name)
		if prov == nil {
			continue
		}
		r := Metrics{Provider: prov, ReportingInterval: intervals[name]}
		if disabledAll[name+"/"+mode.String()] {
			r.Disabled = true
		} else {
			for metric, ov := range providers[name][mode] {
				o := Override{Name: metric, Disabled: ov.disabled != nil && *ov.disabled}
				for k, t := range ov.tags {
					tg := Tag{Name: k}
					switch t.GetOperation() {
					case telemetryv1.MetricsOverrides_TagOverride_REMOVE:
						tg.Remove = true
					default:
						tg.Value = t.GetValue()
					}
					o.Tags = append(o.Tags, tg)
				}
				sort.Slice(o.Tags, func(i, j int) bool { return o.Tags[i].Name < o.Tags[j].Name })
				r.Overrides = append(r.Overrides, o)
			}
			sort.Slice(r.Overrides, func(i, j int) bool { return r.Overrides[i].Name < r.Overrides[j].Name })
		}
		out = append(out, r)
	}
	return out
}

func sides(m telemetryv1.WorkloadMode) []telemetryv1.WorkloadMode {
	if m == telemetryv1.WorkloadMode_CLIENT || m == telemetryv1.WorkloadMode_SERVER {
		return []telemetryv1.WorkloadMode{m}
	}
	return []telemetryv1.WorkloadMode{telemetryv1.WorkloadMode_CLIENT, telemetryv1.WorkloadMode_SERVER}
}

func allMetricsMatch(s *telemetryv1.MetricSelector) bool {
	switch x := s.GetMetricMatch().(type) {
	case *telemetryv1.MetricSelector_CustomMetric:
		return false
	case *telemetryv1.MetricSelector_Metric:
		return x.Metric == telemetryv1.MetricSelector_ALL_METRICS
	}
	return true
}

func metricNames(s *telemetryv1.MetricSelector) []string {
	switch x := s.GetMetricMatch().(type) {
	case *telemetryv1.MetricSelector_CustomMetric:
		return []string{x.CustomMetric}
	case *telemetryv1.MetricSelector_Metric:
		if x.Metric != telemetryv1.MetricSelector_ALL_METRICS {
			return []string{x.Metric.String()}
		}
	}
	return allMetrics
}
