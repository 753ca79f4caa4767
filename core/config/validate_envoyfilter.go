package config

import (
	"fmt"
	"regexp"

	networking "istio.io/api/networking/v1alpha3"
)

// maxProxyVersionLen is the longest proxyVersion expression compiled (as
// istiod: a longer one matches no proxy).
const maxProxyVersionLen = 1024

// validateEnvoyFilter checks an EnvoyFilter with Istio's structural rules
// (pkg/config/validation/envoyfilter): every patch has an applyTo, an
// operation, and a value unless it removes; a proxyVersion is a valid
// regular expression; a match's object type fits its applyTo; a filter
// match names its filter, a sub-filter match is for HTTP_FILTER under the
// HTTP connection manager. Whether a value decodes into its Envoy type is
// checked where it is applied (xdsserver/envoyfilter): a value that does
// not is a problem that skips that patch only, the rest of the filter
// stays in force.
func validateEnvoyFilter(c *Config) Errors {
	var errs Errors
	s, ok := c.Spec.(*networking.EnvoyFilter)
	if !ok {
		return errs
	}
	if len(s.GetWorkloadSelector().GetLabels()) > 0 && len(s.GetTargetRefs()) > 0 {
		errs.Add("spec.workloadSelector", "only one of workloadSelector and targetRefs may be set")
	}
	for i, r := range s.GetTargetRefs() {
		f := fmt.Sprintf("spec.targetRefs[%d]", i)
		if r == nil {
			errs.Add(f, "must not be null")
			continue
		}
		if r.GetName() == "" {
			errs.Add(f+".name", "name is required")
		}
	}
	for i, cp := range s.GetConfigPatches() {
		f := fmt.Sprintf("spec.configPatches[%d]", i)
		if cp == nil {
			errs.Add(f, "must not be null")
			continue
		}
		if cp.GetMatch().GetContext() == networking.EnvoyFilter_WAYPOINT {
			continue // ambient waypoints: not ours, ignored as istiod's sidecars do
		}
		if cp.GetApplyTo() == networking.EnvoyFilter_INVALID {
			errs.Add(f+".applyTo", "missing applyTo")
			continue
		}
		if cp.GetPatch() == nil {
			errs.Add(f+".patch", "missing patch")
			continue
		}
		op := cp.GetPatch().GetOperation()
		if op == networking.EnvoyFilter_Patch_INVALID {
			errs.Add(f+".patch.operation", "missing patch operation")
			continue
		}
		if op != networking.EnvoyFilter_Patch_REMOVE && cp.GetPatch().GetValue() == nil {
			errs.Add(f+".patch.value", "missing patch value for a %s operation", op)
			continue
		}
		if v := cp.GetMatch().GetProxy().GetProxyVersion(); v != "" && len(v) <= maxProxyVersionLen {
			if _, err := regexp.Compile(v); err != nil {
				errs.Add(f+".match.proxy.proxyVersion", "invalid regular expression: %v", err)
			}
		}
		checkEnvoyFilterMatch(&errs, f+".match", cp)
	}
	return errs
}

func checkEnvoyFilterMatch(errs *Errors, f string, cp *networking.EnvoyFilter_EnvoyConfigObjectPatch) {
	m := cp.GetMatch()
	if m == nil || m.GetObjectTypes() == nil {
		return
	}
	switch cp.GetApplyTo() {
	case networking.EnvoyFilter_LISTENER, networking.EnvoyFilter_FILTER_CHAIN, networking.EnvoyFilter_NETWORK_FILTER, networking.EnvoyFilter_HTTP_FILTER:
		l := m.GetListener()
		if l == nil {
			errs.Add(f, "applyTo %s needs a listener match", cp.GetApplyTo())
			return
		}
		flt := l.GetFilterChain().GetFilter()
		if flt == nil {
			return
		}
		if flt.GetName() == "" {
			errs.Add(f+".listener.filterChain.filter.name", "a filter match needs a name to match on")
			return
		}
		if sub := flt.GetSubFilter(); sub != nil {
			switch {
			case cp.GetApplyTo() != networking.EnvoyFilter_HTTP_FILTER:
				errs.Add(f+".listener.filterChain.filter.subFilter", "a subFilter match is for applyTo HTTP_FILTER only")
			case flt.GetName() != "envoy.filters.network.http_connection_manager" && flt.GetName() != "envoy.http_connection_manager":
				errs.Add(f+".listener.filterChain.filter.subFilter", "a subFilter match needs the filter match envoy.filters.network.http_connection_manager")
			case sub.GetName() == "":
				errs.Add(f+".listener.filterChain.filter.subFilter.name", "a subFilter match needs a name to match on")
			}
		}
	case networking.EnvoyFilter_ROUTE_CONFIGURATION, networking.EnvoyFilter_VIRTUAL_HOST, networking.EnvoyFilter_HTTP_ROUTE:
		if m.GetRouteConfiguration() == nil {
			errs.Add(f, "applyTo %s needs a routeConfiguration match", cp.GetApplyTo())
		}
	case networking.EnvoyFilter_CLUSTER:
		if m.GetCluster() == nil {
			errs.Add(f, "applyTo CLUSTER needs a cluster match")
		}
	}
}
