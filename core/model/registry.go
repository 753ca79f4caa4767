package model

import (
	"slices"
	"strings"
	"sync"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/store"
)

// Change says what a batch of config events did to the service model.
type Change struct {
	// Services whose definition changed (added, updated or removed): a
	// full push.
	Services map[ServiceKey]bool
	// Endpoints of services whose endpoints alone changed: the fast path.
	Endpoints map[ServiceKey]bool
	// Addresses of endpoints that came, went or changed: a proxy at one
	// of them may have to rebuild its inbound config.
	Addresses map[string]bool
	// Gateways: the network gateways Kubernetes Services make changed
	// (every proxy's endpoints may change).
	Gateways bool
}

func newChange() Change {
	return Change{Services: map[ServiceKey]bool{}, Endpoints: map[ServiceKey]bool{}, Addresses: map[string]bool{}}
}

// Empty reports whether nothing changed.
func (c Change) Empty() bool { return len(c.Services) == 0 && len(c.Endpoints) == 0 && !c.Gateways }

// Registry is the service model built from ServiceEntries and
// WorkloadEntries. Apply feeds it store events; readers take Services and
// the EndpointIndex. Safe for concurrent use.
type Registry struct {
	mu      sync.RWMutex
	alloc   *Allocator
	entries map[config.Key]*networking.ServiceEntry
	// selectors indexes the ServiceEntries with a workloadSelector by
	// namespace, so a workload change looks only at its namespace's.
	selectors map[string]map[config.Key]map[string]string
	services  map[config.Key][]*Service // by ServiceEntry
	// svcIndex holds the same services by ServiceEntry and hostname, so
	// that Services costs no more for one entry with many hosts.
	svcIndex  map[config.Key]map[string]*Service
	byHost    map[ServiceKey][]config.Key
	workloads map[config.Key]*WorkloadInstance
	// wlByNS indexes workloads by namespace, for selectors.
	wlByNS    map[string]map[config.Key]*WorkloadInstance
	endpoints *EndpointIndex
	// addrProblems are the ServiceEntries some of whose hosts got no
	// automatic address.
	addrProblems map[config.Key]store.Problem
	// badInput are the inputs refused, by key; their last good version
	// stays (update.go).
	badInput map[config.Key]store.Problem
	kube     kubeState // Kubernetes inputs (kube.go)
	// accounts are the service accounts of each service's endpoints,
	// joined (accounts.go).
	accounts map[ServiceKey]string
	// policies are the security policies with a workload selector
	// (policyselect.go).
	policies map[config.Key]selectorPolicy
}

// NewRegistry returns an empty registry.
func NewRegistry(alloc *Allocator) *Registry {
	return &Registry{
		alloc: alloc, entries: map[config.Key]*networking.ServiceEntry{}, selectors: map[string]map[config.Key]map[string]string{},
		services: map[config.Key][]*Service{}, svcIndex: map[config.Key]map[string]*Service{}, byHost: map[ServiceKey][]config.Key{},
		workloads: map[config.Key]*WorkloadInstance{}, wlByNS: map[string]map[config.Key]*WorkloadInstance{},
		endpoints: NewEndpointIndex(), addrProblems: map[config.Key]store.Problem{}, kube: newKubeState(),
	}
}

// Endpoints returns the endpoint index.
func (r *Registry) Endpoints() *EndpointIndex { return r.endpoints }

// Services returns every service, sorted by namespace and hostname. When
// several sources in a namespace declare the same host, a Kubernetes
// Service defines it, else the ServiceEntry whose key sorts first
// (precedence); the endpoints of all are merged.
func (r *Registry) Services() []*Service {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]*Service, 0, len(r.byHost))
	for sk, keys := range r.byHost {
		out = append(out, r.serviceFrom(sk, keys[0]))
	}
	slices.SortFunc(out, func(a, b *Service) int {
		if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
			return c
		}
		return strings.Compare(a.Hostname, b.Hostname)
	})
	return out
}

func (r *Registry) serviceFrom(sk ServiceKey, src config.Key) *Service {
	return r.svcIndex[src][sk.Hostname]
}

// Workload returns a workload instance by its WorkloadEntry key.
func (r *Registry) Workload(k config.Key) (*WorkloadInstance, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	w, ok := r.workloads[k]
	return w, ok
}

// Workloads returns every workload instance.
func (r *Registry) Workloads() []*WorkloadInstance {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]*WorkloadInstance, 0, len(r.workloads))
	for _, w := range r.workloads {
		out = append(out, w)
	}
	slices.SortFunc(out, func(a, b *WorkloadInstance) int { return strings.Compare(a.Source.String(), b.Source.String()) })
	return out
}

// applyEvent applies one store event, marking what must be recomputed;
// a bad one (see checkEvent) changes nothing. Caller holds r.mu.
func (r *Registry) applyEvent(e store.Event, ch Change, d dirty) {
	k := e.Key()
	if !r.checkEvent(k, e.New) {
		return
	}
	switch k.Kind {
	case config.ServiceEntry:
		r.applyServiceEntry(k, e.New, ch)
		d.se[k] = true
	case config.AuthorizationPolicy, config.PeerAuthentication:
		r.notePolicy(k, e.New)
	case config.WorkloadEntry:
		old := r.workloads[k]
		var nw *WorkloadInstance
		if e.New != nil {
			nw = workloadFromEntry(e.New)
		}
		r.setWorkload(k, nw)
		for seKey := range r.selectingEntries(k.Namespace, old, nw) {
			d.se[seKey] = true
		}
		for n := range r.kubeSelecting(k.Namespace, old, nw) {
			d.kube[n] = true
		}
	}
}

func (r *Registry) applyServiceEntry(k config.Key, c *config.Config, ch Change) {
	var nu []*Service
	if c != nil {
		se := c.Spec.(*networking.ServiceEntry)
		r.entries[k] = se
		nu = r.servicesFromEntry(c, se)
	} else {
		delete(r.entries, k)
		delete(r.addrProblems, k)
	}
	r.indexSelector(k, c)
	r.replaceServices(k, nu, ch)
}

// replaceServices makes nu the services source k defines, recording what
// changed; the endpoint shards of hosts k no longer defines are dropped.
func (r *Registry) replaceServices(k config.Key, nu []*Service, ch Change) {
	old := r.services[k]
	oldByHost := map[string]*Service{}
	for _, s := range old {
		oldByHost[s.Hostname] = s
	}
	newHosts := map[string]bool{}
	for _, s := range nu {
		newHosts[s.Hostname] = true
		if o, ok := oldByHost[s.Hostname]; !ok || !o.Equal(s) {
			ch.Services[s.Key()] = true
		}
		if _, ok := oldByHost[s.Hostname]; !ok {
			sk := s.Key()
			r.byHost[sk] = insertSorted(r.byHost[sk], k)
		}
	}
	for _, s := range old {
		if !newHosts[s.Hostname] {
			sk := s.Key()
			ch.Services[sk] = true
			r.byHost[sk] = slices.DeleteFunc(r.byHost[sk], func(x config.Key) bool { return x == k })
			if len(r.byHost[sk]) == 0 {
				delete(r.byHost, sk)
				if s.AutoAllocated {
					r.alloc.Release(sk)
				}
			}
			r.endpoints.SetShard(sk, k, nil, ch.Addresses)
		}
	}
	if len(nu) == 0 {
		delete(r.services, k)
		delete(r.svcIndex, k)
	} else {
		r.services[k] = nu
		idx := make(map[string]*Service, len(nu))
		for _, s := range nu {
			if _, dup := idx[s.Hostname]; !dup {
				idx[s.Hostname] = s // the first, as the scan it replaces
			}
		}
		r.svcIndex[k] = idx
	}
}

// insertSorted inserts k into keys in precedence order (the first
// defines the service).
func insertSorted(keys []config.Key, k config.Key) []config.Key {
	i, found := slices.BinarySearchFunc(keys, k, precedence)
	if found {
		return keys
	}
	return slices.Insert(keys, i, k)
}

func (r *Registry) setWorkload(k config.Key, w *WorkloadInstance) {
	if w == nil {
		delete(r.workloads, k)
		delete(r.wlByNS[k.Namespace], k)
		return
	}
	r.workloads[k] = w
	ns := r.wlByNS[k.Namespace]
	if ns == nil {
		ns = map[config.Key]*WorkloadInstance{}
		r.wlByNS[k.Namespace] = ns
	}
	ns[k] = w
}

// selectingEntries returns the ServiceEntries in ns whose selector matches
// the old or the new labels of a workload.
func (r *Registry) selectingEntries(ns string, old, nu *WorkloadInstance) map[config.Key]bool {
	out := map[config.Key]bool{}
	for seKey, sel := range r.selectors[ns] {
		if (old != nil && matches(sel, old.Labels)) || (nu != nil && matches(sel, nu.Labels)) {
			out[seKey] = true
		}
	}
	return out
}

func (r *Registry) indexSelector(k config.Key, c *config.Config) {
	var sel map[string]string
	if c != nil {
		if ws := c.Spec.(*networking.ServiceEntry).GetWorkloadSelector(); ws != nil {
			sel = ws.GetLabels()
		}
	}
	if sel == nil {
		delete(r.selectors[k.Namespace], k)
		return
	}
	m := r.selectors[k.Namespace]
	if m == nil {
		m = map[config.Key]map[string]string{}
		r.selectors[k.Namespace] = m
	}
	m[k] = sel
}

func matches(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}
