package telemetry

import (
	"sort"

	meshv1alpha1 "istio.io/api/mesh/v1alpha1"
	telemetryv1 "istio.io/api/telemetry/v1alpha1"
)

// resolveTracing merges the levels' tracing for mode, as istiod's
// Telemetries.Tracing: the mesh's first default tracing provider, then
// each level's entries for mode, in order, overriding what they set: the
// first named provider, disableSpanReporting, customTags (the whole set),
// randomSamplingPercentage, useRequestIdForTraceSampling,
// enableIstioTags. With no provider found, tracing is off. nil when no
// Telemetry has tracing and the mesh no default provider: the mesh
// config's legacy tracing applies.
func resolveTracing(m *meshv1alpha1.MeshConfig, levels []*telemetryv1.Telemetry, mode telemetryv1.WorkloadMode) *Tracing {
	defaults := m.GetDefaultProviders().GetTracing()
	any := len(defaults) > 0
	for _, l := range levels {
		any = any || len(l.GetTracing()) > 0
	}
	if !any {
		return nil
	}
	t := &Tracing{UseRequestIDForTraceSampling: true, EnableIstioTags: true}
	if len(defaults) > 0 {
		t.Provider = Provider(m, defaults[0])
	}
	for _, l := range levels {
		for _, tr := range l.GetTracing() {
			if !matches(tr.GetMatch(), mode) {
				continue
			}
			if names := providerRefs(tr.GetProviders()); len(names) > 0 {
				t.Provider = Provider(m, names[0])
			}
			if d := tr.GetDisableSpanReporting(); d != nil {
				t.Disabled = d.GetValue()
			}
			if tr.GetCustomTags() != nil {
				t.CustomTags = tr.GetCustomTags()
			}
			if p := tr.GetRandomSamplingPercentage(); p != nil {
				v := p.GetValue()
				t.Sampling = &v
			}
			if u := tr.GetUseRequestIdForTraceSampling(); u != nil {
				t.UseRequestIDForTraceSampling = u.GetValue()
			}
			if e := tr.GetEnableIstioTags(); e != nil {
				t.EnableIstioTags = e.GetValue()
			}
			if d := tr.GetDisableContextPropagation(); d != nil {
				t.DisableContextPropagation = d.GetValue()
			}
		}
	}
	if t.Provider == nil {
		t.Disabled = true
	}
	return t
}

// resolveLogging merges the levels' access logging for mode, as istiod's
// mergeLogs: the providers in scope are those the most specific entry
// for mode names (else the mesh's default access log providers); each
// entry for mode, in order, sets its providers (or its parent's) on or
// off; a provider's filter is the one of the last entry naming it (an
// entry naming no provider sets no filter, as istiod). nil when nothing
// resolves: the mesh config's accessLogFile applies; empty when every
// provider is off.
func resolveLogging(m *meshv1alpha1.MeshConfig, levels []*telemetryv1.Telemetry, mode telemetryv1.WorkloadMode) []AccessLog {
	defaults := m.GetDefaultProviders().GetAccessLogging()
	var lvls [][]*telemetryv1.AccessLogging
	for _, l := range levels {
		if len(l.GetAccessLogging()) > 0 {
			lvls = append(lvls, l.GetAccessLogging())
		}
	}
	type spec struct {
		filter   string
		disabled bool
	}
	result := map[string]spec{}
	if len(lvls) == 0 {
		if len(defaults) == 0 {
			return nil
		}
		for _, d := range defaults {
			result[d] = spec{}
		}
	} else {
		names := defaults
		filters := map[string]string{}
		for _, lv := range lvls {
			var set []string
			for _, al := range lv {
				if !matches(al.GetMatch(), mode) {
					continue
				}
				for _, p := range providerRefs(al.GetProviders()) {
					set = append(set, p)
					filters[p] = al.GetFilter().GetExpression()
				}
			}
			if len(set) > 0 {
				names = set
			}
		}
		inScope := map[string]bool{}
		for _, n := range names {
			inScope[n] = true
		}
		parent := defaults
		for _, lv := range lvls {
			for _, al := range lv {
				pn := providerRefs(al.GetProviders())
				if len(pn) == 0 {
					pn = parent
				}
				parent = pn
				if !matches(al.GetMatch(), mode) {
					continue
				}
				for _, p := range pn {
					if !inScope[p] {
						continue
					}
					if al.GetDisabled().GetValue() {
						result[p] = spec{disabled: true}
					} else {
						result[p] = spec{filter: filters[p]}
					}
				}
			}
		}
	}
	var provs []string
	for p := range result {
		if Provider(m, p) != nil {
			provs = append(provs, p)
		}
	}
	if len(provs) == 0 {
		return nil
	}
	sort.Strings(provs)
	out := []AccessLog{}
	for _, p := range provs {
		if sp := result[p]; !sp.disabled {
			out = append(out, AccessLog{Provider: Provider(m, p), Filter: sp.filter})
		}
	}
	return out
}
