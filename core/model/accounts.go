package model

import (
	"slices"
	"strings"
)

// ServiceAccounts returns the distinct service accounts of a service's
// endpoints, sorted. Outbound clusters check the upstream certificate
// against them (Istio's service accounts of a service), so a change of
// this set is a change of the service's definition, not of its
// endpoints alone (noteAccountChanges).
func ServiceAccounts(eps []*Endpoint) []string {
	var out []string
	for _, e := range eps {
		if e.ServiceAccount != "" && !slices.Contains(out, e.ServiceAccount) {
			out = append(out, e.ServiceAccount)
		}
	}
	slices.Sort(out)
	return out
}

// noteAccountChanges turns an endpoint-only change whose service
// accounts changed into a service change (a full push: cluster SANs
// follow the accounts), and remembers the accounts of every changed
// service. Called with r.mu held, before endpoint changes of changed
// services are dropped.
func (r *Registry) noteAccountChanges(ch Change) {
	if r.accounts == nil {
		r.accounts = map[ServiceKey]string{}
	}
	note := func(sk ServiceKey) bool {
		cur := strings.Join(ServiceAccounts(r.endpoints.Endpoints(sk)), "\x00")
		old, ok := r.accounts[sk]
		if cur == "" {
			delete(r.accounts, sk)
		} else {
			r.accounts[sk] = cur
		}
		return ok && old != cur || !ok && cur != ""
	}
	for sk := range ch.Endpoints {
		if note(sk) {
			ch.Services[sk] = true
		}
	}
	for sk := range ch.Services {
		note(sk)
	}
}
