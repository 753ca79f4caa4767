package model

import (
	"fmt"
	"time"

	security "istio.io/api/security/v1beta1"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/store"
)

// selectorPolicy is a security policy with a workload selector.
type selectorPolicy struct {
	src   config.Source
	sel   map[string]string
	since time.Time
}

// notePolicy records (or forgets) the selector of an AuthorizationPolicy
// or PeerAuthentication, for policyProblems. Caller holds r.mu.
func (r *Registry) notePolicy(k config.Key, c *config.Config) {
	var sel map[string]string
	if c != nil {
		switch s := c.Spec.(type) {
		case *security.AuthorizationPolicy:
			sel = s.GetSelector().GetMatchLabels()
		case *security.PeerAuthentication:
			sel = s.GetSelector().GetMatchLabels()
		}
	}
	if len(sel) == 0 {
		delete(r.policies, k)
		return
	}
	if r.policies == nil {
		r.policies = map[config.Key]selectorPolicy{}
	}
	since := time.Now()
	if old, ok := r.policies[k]; ok {
		since = old.since
	}
	r.policies[k] = selectorPolicy{src: c.Source, sel: sel, since: since}
}

// policyProblems reports the security policies whose selector matches
// no known workload (WorkloadEntry or pod) of their namespace, nor of
// any other (a root-namespace policy applies mesh-wide): they apply to
// no proxy unless one with those labels connects without being
// registered. Caller holds r.mu (read).
func (r *Registry) policyProblems() []store.Problem {
	var out []store.Problem
	for k, p := range r.policies {
		if r.anyWorkloadMatches(k.Namespace, p.sel) {
			continue
		}
		found := false
		for ns := range r.wlByNS {
			if ns != k.Namespace && r.anyWorkloadMatches(ns, p.sel) {
				found = true
				break
			}
		}
		if found {
			continue
		}
		origin := p.src.File
		if origin == "" {
			origin = p.src.Name
		}
		out = append(out, store.Problem{Source: p.src.Name, Origin: origin, Line: p.src.Line, Resource: k.String(),
			Error: fmt.Sprintf("spec.selector %v matches no registered workload (WorkloadEntry or pod): the policy applies to nothing", p.sel),
			Since: p.since})
	}
	return out
}

func (r *Registry) anyWorkloadMatches(ns string, sel map[string]string) bool {
	for _, w := range r.wlByNS[ns] {
		if matches(sel, w.Labels) {
			return true
		}
	}
	return false
}
