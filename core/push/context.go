// Package push owns the PushContext: an immutable, indexed snapshot of the
// config and the service model that translation reads without locks. A new
// PushContext is built per debounced full change, reusing the indexes of
// the previous one whose inputs did not change.
//
// It imports only core packages.
package push

import (
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	meshv1alpha1 "istio.io/api/mesh/v1alpha1"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/credentials"
	"github.com/baremesh/baremesh/core/jwks"
	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/core/store"
)

// PushContext is one snapshot. It is never altered after Build returns;
// every slice and map it hands out is shared and must not be altered.
type PushContext struct {
	// Version identifies the snapshot; it grows with each build.
	Version uint64
	// Built is when the snapshot was built.
	Built time.Time
	Mesh  *meshv1alpha1.MeshConfig
	// Credentials are the TLS credentials gateways name (nil: none).
	Credentials *credentials.Set
	// TrustRoots is the control plane CA's root-cert.pem (PEM, one or
	// more roots; nil without a CA), served to agents in the trust
	// bundle of their dynamic proxy config.
	TrustRoots []byte
	// JWKS are the key sets fetched for RequestAuthentication jwksUris
	// (nil: none fetched).
	JWKS *jwks.Set
	// Networks are the network gateways of the meshNetworks config (nil:
	// none; every endpoint is reached directly).
	Networks *model.NetworkGateways

	services *serviceIndex
	kinds    map[config.Kind]*kindIndex
	// Endpoints is the endpoint index pinned at one generation. Endpoints
	// take the fast path (they change without a rebuild): Pin gives the
	// snapshot with the endpoints of now.
	Endpoints *model.EndpointView
	live      *model.EndpointIndex
	// gatewayAPI: the Gateway API conversion (gatewayapi.go).
	gatewayAPI *gatewayAPIState
}

// Pin returns the snapshot with its endpoints pinned at the index's
// current generation: pc itself if they have not moved since, else a
// copy that shares everything else. A response is generated from one
// pinned snapshot, so its cache keys and its generators read the same
// endpoints.
func (pc *PushContext) Pin() *PushContext {
	if pc == nil || pc.live == nil {
		return pc
	}
	v := pc.live.View()
	if v == pc.Endpoints {
		return pc
	}
	cp := *pc
	cp.Endpoints = v
	return &cp
}

// Reindex returns the snapshot with the ServiceEntries and
// WorkloadEntries among keys re-read from st and everything else shared,
// at the same Version, built at now. These kinds follow the endpoints'
// fast path: an endpoint-only change re-indexes them without a new
// version, so caches keyed by Version stay warm. That is sound because
// no cached generator reads them (services come from the registry; only
// the Istio config types, which are not cached, serve the configs
// themselves). Keys of other kinds are ignored: they change only with a
// full push. The index is patched, not rebuilt: one copy of the sorted
// list and the changed namespaces' views of it (a full re-list sorted
// 4,000 WorkloadEntries in ~11 ms, per endpoint push).
func (pc *PushContext) Reindex(st store.Reader, keys map[config.Key]bool, now time.Time) *PushContext {
	var cp *PushContext
	for _, kind := range []config.Kind{config.ServiceEntry, config.WorkloadEntry} {
		var changed []config.Key
		for k := range keys {
			if k.Kind == kind {
				changed = append(changed, k)
			}
		}
		if len(changed) == 0 {
			continue
		}
		if cp == nil {
			c := *pc
			c.kinds = maps.Clone(pc.kinds)
			c.Built = now
			cp = &c
		}
		cp.kinds[kind] = patchKind(pc.kinds[kind], st, kind, changed)
	}
	if cp == nil {
		return pc
	}
	return cp.Pin()
}

// patchKind is ix with the configs of keys re-read from st (updated,
// added or removed); ix is not altered.
func patchKind(ix *kindIndex, st store.Reader, kind config.Kind, keys []config.Key) *kindIndex {
	if ix == nil {
		return buildKind(st.List(kind, ""))
	}
	all := slices.Clone(ix.all)
	byNS := maps.Clone(ix.byNS)
	touched := map[string]bool{}
	for _, k := range keys {
		i, found := slices.BinarySearchFunc(all, k, func(c config.Config, k config.Key) int {
			if d := strings.Compare(c.Namespace, k.Namespace); d != 0 {
				return d
			}
			return strings.Compare(c.Name, k.Name)
		})
		c, ok := st.Get(kind, k.Namespace, k.Name)
		switch {
		case found && ok:
			all[i] = c
		case found:
			all = slices.Delete(all, i, i+1)
		case ok:
			all = slices.Insert(all, i, c)
		default:
			continue
		}
		touched[k.Namespace] = true
	}
	// A namespace's configs are one run of the sorted list: its view is
	// that run (capped, so an append cannot write into the list).
	for ns := range touched {
		lo, _ := slices.BinarySearchFunc(all, ns, func(c config.Config, ns string) int { return strings.Compare(c.Namespace, ns) })
		hi := lo
		for hi < len(all) && all[hi].Namespace == ns {
			hi++
		}
		if hi == lo {
			delete(byNS, ns)
		} else {
			byNS[ns] = all[lo:hi:hi]
		}
	}
	return &kindIndex{all: all, byNS: byNS}
}

type serviceIndex struct {
	all    []*model.Service
	byKey  map[model.ServiceKey]*model.Service
	byHost map[string][]*model.Service // a hostname in several namespaces
	// byAge (ServicesByAge) is made on first use.
	ageOnce sync.Once
	byAge   []*model.Service
}

// kindIndex holds the configs of one kind, sorted by namespace and
// name, and by namespace; byAge (ConfigsByAge) is made on first use.
type kindIndex struct {
	all     []config.Config
	byNS    map[string][]config.Config
	ageOnce sync.Once
	byAge   []*config.Config
	// byAgeNS: byAge by namespace, made with it.
	byAgeNS map[string][]*config.Config
	// delegating (VirtualServices only) are those with a route that
	// delegates to another, oldest first; made on first use.
	delegOnce  sync.Once
	delegating []*config.Config
}

// Services returns every service, sorted by namespace and hostname.
func (pc *PushContext) Services() []*model.Service { return pc.services.all }

// ServicesByAge returns every service oldest first, in istiod's order
// (SortServicesByCreationTime: creation time, then hostname, then
// namespace): where services conflict (two claim one outbound listener),
// istiod takes them in this order. Computed once per index; shared.
func (pc *PushContext) ServicesByAge() []*model.Service {
	ix := pc.services
	ix.ageOnce.Do(func() {
		ix.byAge = slices.Clone(ix.all)
		slices.SortStableFunc(ix.byAge, func(a, b *model.Service) int {
			if d := a.CreationTime.Compare(b.CreationTime); d != 0 {
				return d
			}
			if d := strings.Compare(a.Hostname, b.Hostname); d != 0 {
				return d
			}
			return strings.Compare(a.Namespace, b.Namespace)
		})
	})
	return ix.byAge
}

// Service returns the service of hostname in namespace.
func (pc *PushContext) Service(hostname, namespace string) *model.Service {
	return pc.services.byKey[model.ServiceKey{Hostname: hostname, Namespace: namespace}]
}

// ServicesByHost returns the services of hostname in every namespace.
func (pc *PushContext) ServicesByHost(hostname string) []*model.Service {
	return pc.services.byHost[hostname]
}

// Configs returns every config of kind, sorted by namespace and name.
func (pc *PushContext) Configs(kind config.Kind) []config.Config {
	if ix := pc.kinds[kind]; ix != nil {
		return ix.all
	}
	return nil
}

// ConfigsIn returns the configs of kind in namespace.
func (pc *PushContext) ConfigsIn(kind config.Kind, namespace string) []config.Config {
	if ix := pc.kinds[kind]; ix != nil {
		return ix.byNS[namespace]
	}
	return nil
}

// Inputs are what Build reads.
type Inputs struct {
	Store    store.Reader
	Registry *model.Registry
	Mesh     *meshv1alpha1.MeshConfig
	// Credentials: see PushContext.Credentials.
	Credentials *credentials.Set
	// TrustRoots: see PushContext.TrustRoots.
	TrustRoots []byte
	// JWKS: see PushContext.JWKS.
	JWKS *jwks.Set
	// MeshNetworks is the meshNetworks config (nil: none); with the
	// gateways Kubernetes Services make (Registry.KubeGateways) it makes
	// PushContext.Networks.
	MeshNetworks *meshv1alpha1.MeshNetworks
	// GatewayNames are the gateway hostnames' IPs as last resolved
	// (Pipeline.SetGatewayNames; nil: none).
	GatewayNames map[string][]string
}

// Changed says what changed since the previous snapshot, so Build can
// reuse the rest. A nil *Changed means everything.
type Changed struct {
	Kinds    map[config.Kind]bool
	Services bool
	Mesh     bool
}

// indexedKinds are the kinds a snapshot indexes (services come from the
// registry instead of raw ServiceEntries).
var indexedKinds = []config.Kind{
	config.VirtualService, config.DestinationRule, config.Gateway, config.Sidecar,
	config.PeerAuthentication, config.AuthorizationPolicy, config.WorkloadGroup,
	config.WorkloadEntry, config.ServiceEntry,
	config.RequestAuthentication, config.EnvoyFilter, config.Telemetry,
	config.GatewayClass, config.KubernetesGateway, config.HTTPRoute, config.GRPCRoute,
	config.TCPRoute, config.TLSRoute, config.ReferenceGrant, config.BackendTLSPolicy, config.ListenerSet,
}

// Build makes the snapshot after prev (nil for the first), rebuilding only
// what changed says changed. It is pure apart from reading in.
func Build(prev *PushContext, in Inputs, changed *Changed, now time.Time) *PushContext {
	live := in.Registry.Endpoints()
	pc := &PushContext{Built: now, Mesh: in.Mesh, Credentials: in.Credentials, TrustRoots: in.TrustRoots, JWKS: in.JWKS, Endpoints: live.View(), live: live, kinds: map[config.Kind]*kindIndex{}}
	if kube := in.Registry.KubeGateways(); in.MeshNetworks != nil || len(kube) > 0 {
		names := in.GatewayNames
		pc.Networks = model.NewNetworkGateways(in.MeshNetworks, model.GatewayLookups{
			Registry: in.Registry.KubeExternalIPs, Names: func(h string) []string { return names[h] }}, kube...)
	}
	if prev != nil {
		pc.Version = prev.Version + 1
	} else {
		pc.Version = 1
	}
	if prev != nil && changed != nil && !changed.Services {
		pc.services = prev.services
	} else {
		pc.services = buildServices(in.Registry.Services())
	}
	for _, k := range indexedKinds {
		if prev != nil && changed != nil && !changed.Kinds[k] && prev.kinds[k] != nil {
			pc.kinds[k] = prev.kinds[k]
			continue
		}
		pc.kinds[k] = buildKind(in.Store.List(k, ""))
	}
	pc.convertGatewayAPI(prev, changed)
	return pc
}

func buildServices(all []*model.Service) *serviceIndex {
	ix := &serviceIndex{all: all, byKey: make(map[model.ServiceKey]*model.Service, len(all)), byHost: make(map[string][]*model.Service, len(all))}
	for _, s := range all {
		ix.byKey[s.Key()] = s
		ix.byHost[s.Hostname] = append(ix.byHost[s.Hostname], s)
	}
	return ix
}

func buildKind(cs []config.Config) *kindIndex {
	ix := &kindIndex{all: cs, byNS: map[string][]config.Config{}}
	for _, c := range cs {
		ix.byNS[c.Namespace] = append(ix.byNS[c.Namespace], c)
	}
	return ix
}

// ConfigsByAge returns the configs of kind oldest first, in istiod's
// order (configCompareByCreationTime): by creation time, then name, then
// namespace. Where rules conflict (two VirtualServices for one host, the
// routes of several merged on one gateway host), istiod applies them in
// this order. Computed once per index; the configs are the snapshot's
// and must not be altered.
func (pc *PushContext) ConfigsByAge(kind config.Kind) []*config.Config {
	ix := pc.kinds[kind]
	if ix == nil {
		return nil
	}
	ix.ageOnce.Do(func() {
		ix.byAge = make([]*config.Config, len(ix.all))
		for i := range ix.all {
			ix.byAge[i] = &ix.all[i]
		}
		slices.SortStableFunc(ix.byAge, func(a, b *config.Config) int {
			if d := a.CreationTime.Compare(b.CreationTime); d != 0 {
				return d
			}
			if d := strings.Compare(a.Name, b.Name); d != 0 {
				return d
			}
			return strings.Compare(a.Namespace, b.Namespace)
		})
		ix.byAgeNS = make(map[string][]*config.Config, len(ix.byNS))
		for _, c := range ix.byAge {
			ix.byAgeNS[c.Namespace] = append(ix.byAgeNS[c.Namespace], c)
		}
	})
	return ix.byAge
}

// ConfigsInByAge returns the configs of kind in namespace, oldest first
// (ConfigsByAge's order). Computed with ConfigsByAge.
func (pc *PushContext) ConfigsInByAge(kind config.Kind, namespace string) []*config.Config {
	ix := pc.kinds[kind]
	if ix == nil {
		return nil
	}
	pc.ConfigsByAge(kind)
	return ix.byAgeNS[namespace]
}

// SortedNamespaces returns the namespaces that hold configs of kind.
func (pc *PushContext) SortedNamespaces(kind config.Kind) []string {
	ix := pc.kinds[kind]
	if ix == nil {
		return nil
	}
	out := make([]string, 0, len(ix.byNS))
	for ns := range ix.byNS {
		out = append(out, ns)
	}
	slices.Sort(out)
	return out
}
