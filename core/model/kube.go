package model

import (
	"maps"
	"slices"
	"strings"

	"github.com/baremesh/baremesh/core/config"
)

// Kinds of the keys the model gives its Kubernetes inputs. They are not
// store kinds: Kubernetes Services and Pods never enter the config store;
// sources/kube converts them into KubeService and WorkloadInstance values
// and hands them to the registry (Update.Kube).
const (
	KindKubeService config.Kind = "KubernetesService"
	KindPod         config.Kind = "Pod"
	// kindKubeSelected keys the endpoint shard of the WorkloadEntries a
	// Kubernetes Service's selector selects (one per namespace/name, not
	// per cluster, so a VM behind a Service of two clusters is listed
	// once).
	kindKubeSelected config.Kind = "KubernetesService.WorkloadEntries"
)

// KubeServiceKey is the key of Service namespace/name of cluster.
func KubeServiceKey(cluster, namespace, name string) config.Key {
	return config.Key{Kind: KindKubeService, Namespace: namespace, Name: cluster + "/" + name}
}

// PodKey is the key of Pod namespace/name of cluster.
func PodKey(cluster, namespace, name string) config.Key {
	return config.Key{Kind: KindPod, Namespace: namespace, Name: cluster + "/" + name}
}

// KubeService is one Kubernetes Service of one cluster with the endpoints
// its EndpointSlices list, already converted (hostname, ports, protocols,
// endpoint labels, service account, locality, readiness). Service.Selector
// is the Service's selector: it selects WorkloadEntries in the namespace
// (VMs behind a Kubernetes Service); Pods reach the Service only through
// EndpointSlices, as in Kubernetes. Values handed to the registry must not
// be altered afterwards.
type KubeService struct {
	Name      string
	Service   *Service
	Endpoints []*Endpoint
	// Gateways: the Service is a network's east-west gateway (labelled
	// topology.istio.io/network): its external addresses on its gateway
	// port, sorted.
	Gateways []NetworkGateway
	// ExternalIPs are its load balancer's IPs and external IPs, sorted
	// (a meshNetworks gateway's registryServiceName names them).
	ExternalIPs []string
}

// KubeUpdate is one batch of a cluster's changes.
type KubeUpdate struct {
	Cluster string
	// Full says Services and Pods are everything the cluster holds: what
	// the registry holds of the cluster beyond them is removed. A source
	// sends one after every (re)sync, so a reconnect is a diff, not a wipe.
	Full            bool
	Services        []*KubeService
	DeletedServices []config.Key // KubeServiceKey
	// Pods are workload instances whose Source is their PodKey; they are
	// selectable by ServiceEntries' workloadSelector.
	Pods        []*WorkloadInstance
	DeletedPods []config.Key
}

type nsName struct{ ns, name string }

type kubeState struct {
	held map[string]map[config.Key]bool // by cluster: service and pod keys
	// byNS indexes Kubernetes Services by namespace, for WorkloadEntry
	// selection.
	byNS     map[string]map[config.Key]*Service
	pods     map[config.Key]*WorkloadInstance
	selected map[nsName]ServiceKey // the service each selected-WorkloadEntries shard was written for
	// gateways: the network gateways of the Services that are ones;
	// external: the hostname and external IPs of those that have any.
	gateways map[config.Key][]NetworkGateway
	external map[config.Key]externalIPs
}

type externalIPs struct {
	host string
	ips  []string
}

func newKubeState() kubeState {
	return kubeState{held: map[string]map[config.Key]bool{}, byNS: map[string]map[config.Key]*Service{},
		pods: map[config.Key]*WorkloadInstance{}, selected: map[nsName]ServiceKey{}, gateways: map[config.Key][]NetworkGateway{},
		external: map[config.Key]externalIPs{}}
}

// KubeGateways returns the network gateways of the Kubernetes Services
// that are ones (labelled topology.istio.io/network), by network, then
// address and port, each once.
func (r *Registry) KubeGateways() []NetworkGateway {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []NetworkGateway
	for _, gws := range r.kube.gateways {
		out = append(out, gws...)
	}
	slices.SortFunc(out, compareGateways)
	return slices.Compact(out)
}

// KubeExternalIPs returns the load balancer and external IPs of the
// Kubernetes Services of hostname host (every cluster's), sorted, each
// once.
func (r *Registry) KubeExternalIPs(host string) []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []string
	for _, e := range r.kube.external {
		if e.host == host {
			out = append(out, e.ips...)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Clusters returns the clusters the registry holds inputs of, sorted.
func (r *Registry) Clusters() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Sorted(maps.Keys(r.kube.held))
}

// applyKube applies one cluster's batch, marking what must be
// recomputed; a service or pod whose converted content did not change
// changes nothing, a bad one (see checkKube) is skipped. Caller holds
// r.mu.
func (r *Registry) applyKube(u KubeUpdate, ch *Change, d dirty) {
	held := r.kube.held[u.Cluster]
	if held == nil {
		held = map[config.Key]bool{}
		r.kube.held[u.Cluster] = held
	}
	if u.Full {
		// What the cluster's last batches had wrong is judged anew.
		for k := range r.badInput {
			if (k.Kind == KindKubeService || k.Kind == KindPod) && strings.HasPrefix(k.Name, u.Cluster+"/") {
				delete(r.badInput, k)
			}
		}
	}
	seen := map[config.Key]bool{}
	// keepAll: a bad item whose key is unknown is in a full batch, so
	// nothing the batch leaves out can be told removed.
	keepAll := false
	for _, ks := range u.Services {
		k, ok := r.checkKubeService(u.Cluster, ks)
		if !ok {
			// Kept as it was, and not removed by a full batch.
			seen[k], keepAll = true, keepAll || k == (config.Key{})
			continue
		}
		seen[k], held[k] = true, true
		r.setKubeService(k, ks, ch)
		d.kube[nsName{k.Namespace, ks.Name}] = true
	}
	for _, k := range u.DeletedServices {
		delete(held, k)
		r.clearBadInput(k)
		r.setKubeService(k, nil, ch)
		d.kube[nsName{k.Namespace, kubeName(k)}] = true
	}
	for _, w := range u.Pods {
		k, ok := r.checkPod(u.Cluster, w)
		if !ok {
			seen[k], keepAll = true, keepAll || k == (config.Key{})
			continue
		}
		seen[k], held[k] = true, true
		r.setPod(k, w, d.se, d.kube)
	}
	for _, k := range u.DeletedPods {
		delete(held, k)
		r.clearBadInput(k)
		r.setPod(k, nil, d.se, d.kube)
	}
	if u.Full && !keepAll {
		for k := range held {
			if seen[k] {
				continue
			}
			delete(held, k)
			if k.Kind == KindPod {
				r.setPod(k, nil, d.se, d.kube)
			} else {
				r.setKubeService(k, nil, ch)
				d.kube[nsName{k.Namespace, kubeName(k)}] = true
			}
		}
	}
	if len(held) == 0 {
		delete(r.kube.held, u.Cluster)
	}
}

func kubeName(k config.Key) string {
	_, name, _ := strings.Cut(k.Name, "/")
	return name
}

func (r *Registry) setKubeService(k config.Key, ks *KubeService, ch *Change) {
	var gws []NetworkGateway
	var ext externalIPs
	if ks != nil {
		gws = ks.Gateways
		if len(ks.ExternalIPs) > 0 {
			ext = externalIPs{ks.Service.Hostname, ks.ExternalIPs}
		}
	}
	if !slices.Equal(r.kube.gateways[k], gws) {
		if gws == nil {
			delete(r.kube.gateways, k)
		} else {
			r.kube.gateways[k] = gws
		}
		ch.Gateways = true
	}
	// External IPs can be a meshNetworks gateway's (registryServiceName).
	if old := r.kube.external[k]; old.host != ext.host || !slices.Equal(old.ips, ext.ips) {
		if ext.ips == nil {
			delete(r.kube.external, k)
		} else {
			r.kube.external[k] = ext
		}
		ch.Gateways = true
	}
	var nu []*Service
	if ks != nil {
		s := *ks.Service
		s.Source = k
		nu = []*Service{&s}
		m := r.kube.byNS[k.Namespace]
		if m == nil {
			m = map[config.Key]*Service{}
			r.kube.byNS[k.Namespace] = m
		}
		m[k] = &s
	} else {
		delete(r.kube.byNS[k.Namespace], k)
	}
	r.replaceServices(k, nu, *ch)
	if ks != nil {
		if r.endpoints.SetShard(nu[0].Key(), k, ks.Endpoints, ch.Addresses) {
			ch.Endpoints[nu[0].Key()] = true
		}
	}
}

func (r *Registry) setPod(k config.Key, w *WorkloadInstance, dirtySE map[config.Key]bool, dirtyKube map[nsName]bool) {
	old := r.kube.pods[k]
	if old == nil && w == nil || old != nil && w != nil && workloadEqual(old, w) {
		return
	}
	if w == nil {
		delete(r.kube.pods, k)
		delete(r.wlByNS[k.Namespace], k)
	} else {
		r.kube.pods[k] = w
		ns := r.wlByNS[k.Namespace]
		if ns == nil {
			ns = map[config.Key]*WorkloadInstance{}
			r.wlByNS[k.Namespace] = ns
		}
		ns[k] = w
	}
	for seKey := range r.selectingEntries(k.Namespace, old, w) {
		dirtySE[seKey] = true
	}
}

func workloadEqual(a, b *WorkloadInstance) bool {
	return a.Name == b.Name && a.Namespace == b.Namespace && a.Address == b.Address && maps.Equal(a.Labels, b.Labels) &&
		maps.Equal(a.Ports, b.Ports) && a.Network == b.Network && a.Locality == b.Locality && a.Weight == b.Weight &&
		a.ServiceAccount == b.ServiceAccount && a.Healthy == b.Healthy && a.Source == b.Source
}

// kubeSelecting returns the Kubernetes Services in ns whose selector
// matches the old or new labels of a WorkloadEntry.
func (r *Registry) kubeSelecting(ns string, old, nu *WorkloadInstance) map[nsName]bool {
	out := map[nsName]bool{}
	for k, s := range r.kube.byNS[ns] {
		if len(s.Selector) == 0 {
			continue
		}
		if (old != nil && matches(s.Selector, old.Labels)) || (nu != nil && matches(s.Selector, nu.Labels)) {
			out[nsName{ns, kubeName(k)}] = true
		}
	}
	return out
}

// recomputeKubeSelected rebuilds the shard of WorkloadEntries that
// Service n selects. The selector and ports are those of the cluster that
// sorts first among those holding the Service.
func (r *Registry) recomputeKubeSelected(n nsName, ch Change) {
	var def *Service
	for _, c := range slices.Sorted(maps.Keys(r.kube.held)) {
		if s := r.kube.byNS[n.ns][KubeServiceKey(c, n.ns, n.name)]; s != nil {
			def = s
			break
		}
	}
	shard := config.Key{Kind: kindKubeSelected, Namespace: n.ns, Name: n.name}
	prev, hadPrev := r.kube.selected[n]
	var eps []*Endpoint
	if def != nil && len(def.Selector) > 0 {
		var instances []*WorkloadInstance
		for k, w := range r.wlByNS[n.ns] {
			if k.Kind == config.WorkloadEntry && matches(def.Selector, w.Labels) {
				instances = append(instances, w)
			}
		}
		slices.SortFunc(instances, func(a, b *WorkloadInstance) int { return strings.Compare(a.Name, b.Name) })
		for _, w := range instances {
			for _, p := range def.Ports {
				eps = append(eps, endpointFor(def, p, w))
			}
		}
	}
	if hadPrev && (def == nil || prev != def.Key() || len(eps) == 0) {
		if r.endpoints.SetShard(prev, shard, nil, ch.Addresses) {
			ch.Endpoints[prev] = true
		}
		delete(r.kube.selected, n)
	}
	if len(eps) > 0 {
		r.kube.selected[n] = def.Key()
		if r.endpoints.SetShard(def.Key(), shard, eps, ch.Addresses) {
			ch.Endpoints[def.Key()] = true
		}
	}
}
