package model

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/store"
)

// maxNamedHosts bounds the hosts a problem names, so that a ServiceEntry
// with a million address-less hosts makes one short problem.
const maxNamedHosts = 5

// Problems returns what the model could not build as configured: the
// ServiceEntries some of whose hosts got no automatic address
// (ErrAddressesExhausted), one problem each, sorted by origin and line.
// Those hosts are services without an address until their ServiceEntry
// changes after addresses were freed. And the AuthorizationPolicies and
// PeerAuthentications whose selector matches no registered workload. And
// the inputs refused as unreadable (Apply), each naming its resource.
func (r *Registry) Problems() []store.Problem {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]store.Problem, 0, len(r.addrProblems))
	for _, p := range r.addrProblems {
		out = append(out, p)
	}
	out = append(out, r.policyProblems()...)
	out = append(out, r.badInputProblems()...)
	slices.SortFunc(out, func(a, b store.Problem) int {
		if c := strings.Compare(a.Origin, b.Origin); c != 0 {
			return c
		}
		if a.Line != b.Line {
			return a.Line - b.Line
		}
		return strings.Compare(a.Resource, b.Resource)
	})
	return out
}

// setAddressProblem records (or clears, when hosts is empty) the hosts of
// ServiceEntry c (of total hosts) left without an automatic address.
// Caller holds r.mu.
func (r *Registry) setAddressProblem(c *config.Config, hosts []string, total int) {
	k := c.Key()
	if len(hosts) == 0 {
		delete(r.addrProblems, k)
		return
	}
	named := strings.Join(hosts[:min(len(hosts), maxNamedHosts)], ", ")
	if len(hosts) > maxNamedHosts {
		named += ", …"
	}
	origin := c.Source.File
	if origin == "" {
		origin = c.Source.Name
	}
	p := store.Problem{
		Source: c.Source.Name, Origin: origin, Line: c.Source.Line, Resource: k.String(),
		Error: fmt.Sprintf("%d of %d hosts have no address (%s): %v", len(hosts), total, named, ErrAddressesExhausted),
		Since: time.Now(),
	}
	if old, ok := r.addrProblems[k]; ok && old.Error == p.Error {
		p.Since = old.Since
	}
	r.addrProblems[k] = p
}
