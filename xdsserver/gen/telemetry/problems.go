package telemetry

import (
	"fmt"
	"sort"
	"strings"

	telemetryv1 "istio.io/api/telemetry/v1alpha1"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/push"
	"github.com/baremesh/baremesh/core/store"
	"github.com/baremesh/baremesh/xdsserver/gen/scope"
)

// Problems are the Telemetry resources of the snapshot that cannot apply
// as written, each named with its reason (for /debug/configz): a provider
// the mesh config's extensionProviders does not define (that provider is
// skipped, the rest kept), and a second Telemetry at one level (the
// namespace without selector, or the same selector): istiod applies the
// oldest (then the first by name) and ignores the others. The rest of
// every resource stays in force.
func Problems(pc *push.PushContext) []store.Problem {
	if pc == nil {
		return nil
	}
	var out []store.Problem
	add := func(c *config.Config, format string, args ...any) {
		origin := c.Source.File
		if origin == "" {
			origin = c.Source.Name
		}
		out = append(out, store.Problem{Source: c.Source.Name, Origin: origin, Line: c.Source.Line, Resource: c.Key().String(),
			Error: fmt.Sprintf(format, args...), Since: pc.Built})
	}
	root := scope.RootNamespace(pc)
	levels := map[string][]config.Config{}
	for _, c := range pc.Configs(config.Telemetry) {
		t, ok := c.Spec.(*telemetryv1.Telemetry)
		if !ok {
			continue
		}
		check := func(field string, refs []*telemetryv1.ProviderRef) {
			for i, r := range refs {
				if r.GetName() != "" && Provider(pc.Mesh, r.GetName()) == nil {
					add(&c, "%s.providers[%d]: provider %q is not defined in the mesh config's extensionProviders; it is skipped", field, i, r.GetName())
				}
			}
		}
		for i, l := range t.GetAccessLogging() {
			check(fmt.Sprintf("spec.accessLogging[%d]", i), l.GetProviders())
		}
		for i, l := range t.GetTracing() {
			check(fmt.Sprintf("spec.tracing[%d]", i), l.GetProviders())
		}
		for i, l := range t.GetMetrics() {
			check(fmt.Sprintf("spec.metrics[%d]", i), l.GetProviders())
		}
		if len(t.GetTargetRefs()) > 0 || t.GetTargetRef() != nil {
			continue
		}
		level := c.Namespace + "|" + canonicalSelector(t.GetSelector().GetMatchLabels())
		levels[level] = append(levels[level], c)
	}
	keys := make([]string, 0, len(levels))
	for k := range levels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		cs := levels[k]
		if len(cs) < 2 {
			continue
		}
		sort.SliceStable(cs, func(i, j int) bool {
			if !cs[i].CreationTime.Equal(cs[j].CreationTime) {
				return cs[i].CreationTime.Before(cs[j].CreationTime)
			}
			return cs[i].Name < cs[j].Name
		})
		ns, sel, _ := strings.Cut(k, "|")
		what := "namespace " + ns + " without selector"
		if ns == root && sel == "" {
			what = "the mesh (root namespace " + ns + ", no selector)"
		} else if sel != "" {
			what = "namespace " + ns + " with selector {" + sel + "}"
		}
		for _, c := range cs[1:] {
			add(&c, "two Telemetry resources at one level, %s: %s applies (the oldest), this one is ignored", what, cs[0].Key())
		}
	}
	return out
}

func canonicalSelector(m map[string]string) string {
	parts := make([]string, 0, len(m))
	for k, v := range m {
		parts = append(parts, k+"="+v)
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}
