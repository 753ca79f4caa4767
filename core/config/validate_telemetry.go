package config

import (
	"github.com/google/cel-go/cel"
	telemetry "istio.io/api/telemetry/v1alpha1"
)

// celEnv parses access log filter expressions, as Istio's validation
// does (a parse, not a type check: the attributes are Envoy's).
var celEnv, _ = cel.NewEnv()

// validateTelemetry checks a Telemetry with Istio's rules
// (ValidateTelemetry): one of selector, targetRef, targetRefs; provider
// names set; access log filters that parse as CEL; tracing sampling in
// [0, 100] and custom tags with a value; metric tag overrides whose value
// goes with their operation. What needs the mesh config (a provider the
// mesh does not define) or other resources (two Telemetry resources at
// one level) is judged on the snapshot: TelemetryProblems.
func validateTelemetry(c *Config) Errors {
	var errs Errors
	t := c.Spec.(*telemetry.Telemetry)
	checkMatchLabels(&errs, "spec.selector", t.GetSelector())
	set := 0
	if t.GetSelector() != nil {
		set++
	}
	if t.GetTargetRef() != nil {
		set++
		checkTargetRef(&errs, "spec.targetRef", t.GetTargetRef())
	}
	if len(t.GetTargetRefs()) > 0 {
		set++
		for i, r := range t.GetTargetRefs() {
			checkTargetRef(&errs, idx("spec.targetRefs", i), r)
		}
	}
	if set > 1 {
		errs.Add("spec.selector", "only one of selector, targetRef and targetRefs may be set")
	}
	providers := func(field string, refs []*telemetry.ProviderRef) {
		for i, p := range refs {
			if p.GetName() == "" {
				errs.Add(idx(field+".providers", i)+".name", "a provider name may not be empty")
			}
		}
	}
	for i, l := range t.GetAccessLogging() {
		f := idx("spec.accessLogging", i)
		providers(f, l.GetProviders())
		if fl := l.GetFilter(); fl != nil {
			if _, iss := celEnv.Parse(fl.GetExpression()); iss.Err() != nil {
				errs.Add(f+".filter.expression", "must be a valid CEL expression: %v", iss.Err())
			}
		}
	}
	for i, tr := range t.GetTracing() {
		f := idx("spec.tracing", i)
		providers(f, tr.GetProviders())
		if p := tr.GetRandomSamplingPercentage().GetValue(); p < 0 || p > 100 {
			errs.Add(f+".randomSamplingPercentage", "must be in [0.0, 100.0], got %v", p)
		}
		for name, tag := range tr.GetCustomTags() {
			tf := f + ".customTags[" + name + "]"
			switch {
			case name == "":
				errs.Add(tf, "a tag name may not be empty")
			case tag == nil || tag.GetType() == nil:
				errs.Add(tf, "a tag needs a literal, environment or header value")
			case tag.GetLiteral() != nil && tag.GetLiteral().GetValue() == "":
				errs.Add(tf+".literal.value", "may not be empty")
			case tag.GetHeader() != nil && tag.GetHeader().GetName() == "":
				errs.Add(tf+".header.name", "may not be empty")
			case tag.GetEnvironment() != nil && tag.GetEnvironment().GetName() == "":
				errs.Add(tf+".environment.name", "may not be empty")
			}
		}
	}
	for i, m := range t.GetMetrics() {
		f := idx("spec.metrics", i)
		providers(f, m.GetProviders())
		for j, o := range m.GetOverrides() {
			of := idx(f+".overrides", j)
			if cm, ok := o.GetMatch().GetMetricMatch().(*telemetry.MetricSelector_CustomMetric); ok && cm.CustomMetric == "" {
				errs.Add(of+".match.customMetric", "may not be empty")
			}
			for name, to := range o.GetTagOverrides() {
				tf := of + ".tagOverrides[" + name + "]"
				switch {
				case to == nil:
					errs.Add(tf, "may not be null")
				case to.GetOperation() == telemetry.MetricsOverrides_TagOverride_UPSERT && to.GetValue() == "":
					errs.Add(tf+".value", "must be set when the operation is UPSERT")
				case to.GetOperation() == telemetry.MetricsOverrides_TagOverride_REMOVE && to.GetValue() != "":
					errs.Add(tf+".value", "may only be set when the operation is UPSERT")
				}
			}
		}
	}
	return errs
}
