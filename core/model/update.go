// The one way into the service model: an Update, whatever its source.

package model

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	networking "istio.io/api/networking/v1alpha3"
	security "istio.io/api/security/v1beta1"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/store"
)

// Update is one batch of the service model's input. Every source reaches
// the model this way (through push.Pipeline, which queues the push the
// Change calls for): config store events (files, MCP, Kubernetes' Istio
// resources, baremesh's own entries), of which ServiceEntries,
// WorkloadEntries and the selectors of AuthorizationPolicies and
// PeerAuthentications count (other kinds are ignored), and one Kubernetes
// cluster's Services, EndpointSlices and Pods, converted by sources/kube.
type Update struct {
	Events []store.Event
	Kube   *KubeUpdate
}

// dirty are what a batch makes the registry recompute once at its end.
type dirty struct {
	se   map[config.Key]bool // ServiceEntries whose endpoints need recomputing
	kube map[nsName]bool     // Kubernetes Services whose WorkloadEntries need reselecting
}

// Apply updates the model from u and says what changed. An input the
// model cannot read (a spec of the wrong type, a Kubernetes Service
// without its hostname, a Pod without its key) changes nothing: the last
// good state of that resource stays, and Problems names it with the
// reason until a good version (or its deletion) arrives.
func (r *Registry) Apply(u Update) Change {
	r.mu.Lock()
	defer r.mu.Unlock()
	ch := newChange()
	d := dirty{se: map[config.Key]bool{}, kube: map[nsName]bool{}}
	for _, e := range u.Events {
		r.applyEvent(e, ch, d)
	}
	if u.Kube != nil {
		r.applyKube(*u.Kube, &ch, d)
	}
	for seKey := range d.se {
		r.recomputeEndpoints(seKey, ch)
	}
	for n := range d.kube {
		r.recomputeKubeSelected(n, ch)
	}
	r.noteAccountChanges(ch)
	for sk := range ch.Services {
		delete(ch.Endpoints, sk)
	}
	return ch
}

// checkEvent reports whether the model can read c (nil: a deletion) as
// kind k, recording or clearing k's problem. Caller holds r.mu.
func (r *Registry) checkEvent(k config.Key, c *config.Config) bool {
	if c == nil {
		r.clearBadInput(k)
		return true
	}
	var ok bool
	switch k.Kind {
	case config.ServiceEntry:
		_, ok = c.Spec.(*networking.ServiceEntry)
	case config.WorkloadEntry:
		_, ok = c.Spec.(*networking.WorkloadEntry)
	case config.AuthorizationPolicy:
		_, ok = c.Spec.(*security.AuthorizationPolicy)
	case config.PeerAuthentication:
		_, ok = c.Spec.(*security.PeerAuthentication)
	default:
		return true // not the model's
	}
	if !ok {
		r.setBadInput(k, c.Source, fmt.Sprintf("spec is %T, not a %s", c.Spec, k.Kind))
		return false
	}
	r.clearBadInput(k)
	return true
}

// checkKubeService returns the key of a cluster's Service and whether the
// model can read it; the zero key when not even that is known. Caller
// holds r.mu.
func (r *Registry) checkKubeService(cluster string, ks *KubeService) (config.Key, bool) {
	src := config.Source{Name: "kube:" + cluster}
	switch {
	case ks == nil:
		r.setBadInput(config.Key{Kind: KindKubeService, Name: cluster + "/?"}, src, "no Service")
		return config.Key{}, false
	case ks.Service == nil || ks.Service.Namespace == "" || ks.Name == "":
		r.setBadInput(config.Key{Kind: KindKubeService, Name: cluster + "/" + ks.Name}, src, "no namespace or name")
		return config.Key{}, false
	}
	k := KubeServiceKey(cluster, ks.Service.Namespace, ks.Name)
	var bad string
	switch {
	case ks.Service.Hostname == "":
		bad = "no hostname"
	case slices.Contains(ks.Endpoints, nil):
		bad = "a nil endpoint"
	}
	if bad != "" {
		r.setBadInput(k, src, bad)
		return k, false
	}
	r.clearBadInput(k)
	return k, true
}

// checkPod returns the key of a cluster's Pod and whether the model can
// read it. Caller holds r.mu.
func (r *Registry) checkPod(cluster string, w *WorkloadInstance) (config.Key, bool) {
	src := config.Source{Name: "kube:" + cluster}
	switch {
	case w == nil:
		r.setBadInput(config.Key{Kind: KindPod, Name: cluster + "/?"}, src, "no Pod")
		return config.Key{}, false
	case w.Source.Kind != KindPod || w.Source.Namespace == "" || !strings.HasPrefix(w.Source.Name, cluster+"/"):
		r.setBadInput(config.Key{Kind: KindPod, Namespace: w.Namespace, Name: cluster + "/" + w.Name}, src,
			fmt.Sprintf("its key %s is not a Pod key of cluster %s", w.Source, cluster))
		return config.Key{}, false
	case w.Address == "":
		r.setBadInput(w.Source, src, "no address")
		return w.Source, false
	}
	r.clearBadInput(w.Source)
	return w.Source, true
}

// setBadInput records that k's latest version was refused. Caller holds
// r.mu.
func (r *Registry) setBadInput(k config.Key, src config.Source, reason string) {
	origin := src.File
	if origin == "" {
		origin = src.Name
	}
	p := store.Problem{Source: src.Name, Origin: origin, Line: src.Line, Resource: k.String(),
		Error: reason + "; the last good version stays in the service model", Since: time.Now()}
	if old, ok := r.badInput[k]; ok && old.Error == p.Error {
		p.Since = old.Since
	}
	if r.badInput == nil {
		r.badInput = map[config.Key]store.Problem{}
	}
	r.badInput[k] = p
}

func (r *Registry) clearBadInput(k config.Key) { delete(r.badInput, k) }

// badInputProblems lists the refused inputs. Caller holds r.mu.
func (r *Registry) badInputProblems() []store.Problem {
	return slices.Collect(maps.Values(r.badInput))
}

// precedence ranks the sources defining one hostname in one namespace, as
// istiod does (pilot/pkg/model's initServiceRegistry): a Kubernetes
// Service over a ServiceEntry (no one squats a Service's hostname), then
// among equals the key that sorts first (istiod takes the oldest; keys
// are what every replica and restart agrees on).
func precedence(a, b config.Key) int {
	rank := func(k config.Key) int {
		if k.Kind == KindKubeService {
			return 0
		}
		return 1
	}
	if c := rank(a) - rank(b); c != 0 {
		return c
	}
	return strings.Compare(a.String(), b.String())
}
