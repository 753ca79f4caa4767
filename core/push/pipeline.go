package push

import (
	"context"
	"maps"
	"slices"

	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	networking "istio.io/api/networking/v1alpha3"

	meshv1alpha1 "istio.io/api/mesh/v1alpha1"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/credentials"
	"github.com/baremesh/baremesh/core/jwks"
	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/core/store"
)

// PipelineOptions configure a Pipeline.
type PipelineOptions struct {
	// Debounce is the quiet period that merges changes (default 100 ms);
	// DebounceMax bounds the delay of a continuous stream (default 10 s).
	Debounce    time.Duration
	DebounceMax time.Duration
	// EndpointsBypassDebounce sends endpoint-only changes at once.
	EndpointsBypassDebounce bool
	// DebounceLeading pushes a change at once when nothing has been
	// pushed for a Debounce period (the leading edge); the changes that
	// follow within the period are merged and debounced as without it.
	// A burst after a quiet period is then two pushes, its first change
	// alone and the rest, where istiod's debounce makes one; a lone
	// change waits for no quiet period.
	DebounceLeading bool
	Logger          *slog.Logger
}

// Listener receives each published snapshot with the request that made it.
// It is called from one goroutine, in order.
type Listener func(pc *PushContext, req *Request)

// Pipeline turns store events into snapshots and push requests: events
// update the service model at once; a debouncer merges the resulting
// requests; a full request builds a new PushContext (reusing what did not
// change), an endpoint-only request reuses the current one.
type Pipeline struct {
	opts     PipelineOptions
	store    store.Reader
	registry *model.Registry
	mesh     atomic.Pointer[meshv1alpha1.MeshConfig]
	creds    atomic.Pointer[credentials.Set]
	roots    atomic.Pointer[[]byte]
	jwks     atomic.Pointer[jwks.Set]
	networks atomic.Pointer[meshv1alpha1.MeshNetworks]
	gwNames  atomic.Pointer[map[string][]string]
	current  atomic.Pointer[PushContext]
	// pinned is current re-pinned at a later endpoint generation, shared
	// by every caller until the endpoints move again.
	pinned atomic.Pointer[PushContext]

	mu      sync.Mutex
	pending *Request
	// unindexed are the kinds that feed the model (Kind.FeedsModel) with
	// changes no push has re-indexed yet: set before the model is
	// updated, so a push that flushes in between re-indexes them too.
	unindexed map[config.Kind]bool
	kick      chan struct{}
	listeners []Listener
	ready     chan struct{}
}

// NewPipeline returns a pipeline over st. Subscribe it to the store with
// st.Subscribe(p.OnEvents) before the sources start.
func NewPipeline(st store.Reader, reg *model.Registry, mesh *meshv1alpha1.MeshConfig, opts PipelineOptions) *Pipeline {
	if opts.Debounce <= 0 {
		opts.Debounce = 100 * time.Millisecond
	}
	if opts.DebounceMax <= 0 {
		opts.DebounceMax = 10 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	p := &Pipeline{opts: opts, store: st, registry: reg, kick: make(chan struct{}, 1), ready: make(chan struct{})}
	p.mesh.Store(mesh)
	return p
}

// AddListener registers l; call before Run.
func (p *Pipeline) AddListener(l Listener) { p.listeners = append(p.listeners, l) }

// Current returns the latest snapshot with its endpoints pinned now
// (PushContext.Pin), or nil before the first.
func (p *Pipeline) Current() *PushContext {
	pc := p.current.Load()
	if pc == nil || pc.live == nil {
		return pc
	}
	v := pc.live.View()
	if v == pc.Endpoints {
		return pc
	}
	if q := p.pinned.Load(); q != nil && q.Version == pc.Version && q.Built == pc.Built && q.Endpoints == v {
		return q
	}
	q := pc.Pin()
	p.pinned.Store(q)
	return q
}

// Ready is closed when the first snapshot is published.
func (p *Pipeline) Ready() <-chan struct{} { return p.ready }

// OnEvents is the store handler: subscribe it with st.Subscribe.
func (p *Pipeline) OnEvents(events []store.Event) { p.Apply(model.Update{Events: events}) }

// OnKube takes a Kubernetes cluster's Services, EndpointSlices and Pods
// (sources/kube's Options.Model).
func (p *Pipeline) OnKube(u model.KubeUpdate) { p.Apply(model.Update{Kube: &u}) }

// Apply is the one way into the service model, for every source: it
// updates the model with u and queues the push that calls for (a full
// push when a service's definition or a config other than a
// ServiceEntry or WorkloadEntry changed, an endpoint push when only
// endpoints did; nothing when nothing changed).
func (p *Pipeline) Apply(u model.Update) {
	req := &Request{Start: time.Now(), Reasons: Reasons{}}
	var fed map[config.Kind]bool
	for _, e := range u.Events {
		k := e.Key()
		// Kinds that feed the model (ServiceEntries, WorkloadEntries)
		// are judged through the model's change below (a full push only
		// if a service changed), but always listed: the Istio config
		// types serve them as they are to MCP subscribers (istiod),
		// whatever the model made of them, even a WorkloadEntry nobody
		// here selects.
		if k.Kind.FeedsModel() {
			if fed == nil {
				fed = map[config.Kind]bool{}
			}
			fed[k.Kind] = true
		} else {
			req.Full = true
		}
		if req.Configs == nil {
			req.Configs = map[config.Key]bool{}
		}
		req.Configs[k] = true
		if k.Kind == config.VirtualService && gatewayOnly(e.Old) && gatewayOnly(e.New) {
			if req.GatewayOnly == nil {
				req.GatewayOnly = map[config.Key]bool{}
			}
			req.GatewayOnly[k] = true
		}
	}
	if len(fed) > 0 {
		// Set before the model is updated, so a push that flushes in
		// between re-indexes them too.
		p.mu.Lock()
		if p.unindexed == nil {
			p.unindexed = map[config.Kind]bool{}
		}
		maps.Copy(p.unindexed, fed)
		p.mu.Unlock()
	}
	ch := p.registry.Apply(u)
	if len(ch.Services) > 0 {
		req.Full = true
		req.Services = ch.Services
	}
	req.Endpoints = ch.Endpoints
	if len(ch.Endpoints) > 0 {
		req.Addresses = ch.Addresses
	}
	if ch.Gateways { // a Kubernetes Service that is a network gateway
		req.Full = true
		req.Reasons[ReasonNetworks] = 1
	}
	switch {
	case ch.Gateways:
	case u.Kube != nil && len(ch.Services) > 0:
		req.Reasons[ReasonKubeService] = 1
	case u.Kube != nil && len(ch.Endpoints) > 0:
		req.Reasons[ReasonKubeEndpoint] = 1
	case req.Full:
		req.Reasons[ReasonConfig] = 1
	case len(req.Endpoints) > 0:
		req.Reasons[ReasonEndpoint] = 1
	case len(req.Configs) > 0:
		// ServiceEntries or WorkloadEntries that change no service or
		// endpoint here: only their Istio config types see them.
		req.Reasons[ReasonConfig] = 1
	default:
		return
	}
	p.enqueue(req)
}

// Mesh is the mesh config in force (the next push builds with it).
func (p *Pipeline) Mesh() *meshv1alpha1.MeshConfig { return p.mesh.Load() }

// SetMesh replaces the mesh config and queues a full push.
func (p *Pipeline) SetMesh(m *meshv1alpha1.MeshConfig) {
	p.mesh.Store(m)
	p.enqueue(&Request{Full: true, Start: time.Now(), Reasons: NewReasons(ReasonMesh)})
}

// SetCredentials replaces the gateway credentials and queues a full push
// (reason "credentials", which only gateways see).
func (p *Pipeline) SetCredentials(c *credentials.Set) {
	p.creds.Store(c)
	p.enqueue(&Request{Full: true, Start: time.Now(), Reasons: NewReasons(ReasonCredentials)})
}

// SetNetworks replaces the meshNetworks config (nil: none) and queues a
// full push (reason "networks", global: every proxy's endpoints may
// change).
func (p *Pipeline) SetNetworks(n *meshv1alpha1.MeshNetworks) {
	p.networks.Store(n)
	p.enqueue(&Request{Full: true, Start: time.Now(), Reasons: NewReasons(ReasonNetworks)})
}

// SetGatewayNames replaces the IPs network gateway hostnames resolved
// to (NetworkGateways.Names; the map is the pipeline's from then on) and
// queues a networks push.
func (p *Pipeline) SetGatewayNames(m map[string][]string) {
	p.gwNames.Store(&m)
	p.enqueue(&Request{Full: true, Start: time.Now(), Reasons: NewReasons(ReasonNetworks)})
}

func (p *Pipeline) gatewayNames() map[string][]string {
	if m := p.gwNames.Load(); m != nil {
		return *m
	}
	return nil
}

// SetTrustRoots replaces the CA's roots (PEM; see
// PushContext.TrustRoots) and queues a full push (reason "trust"). The
// caller must not alter pem afterwards.
func (p *Pipeline) SetTrustRoots(pem []byte) {
	p.roots.Store(&pem)
	p.enqueue(&Request{Full: true, Start: time.Now(), Reasons: NewReasons(ReasonTrust)})
}

// SetJWKS replaces the fetched JWT key sets (core/jwks) and queues a
// full push (reason "jwks").
func (p *Pipeline) SetJWKS(s *jwks.Set) {
	p.jwks.Store(s)
	p.enqueue(&Request{Full: true, Start: time.Now(), Reasons: NewReasons(ReasonJWKS)})
}

func (p *Pipeline) trustRoots() []byte {
	if r := p.roots.Load(); r != nil {
		return *r
	}
	return nil
}

func (p *Pipeline) enqueue(r *Request) {
	p.mu.Lock()
	p.pending = p.pending.Merge(r)
	p.mu.Unlock()
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// Run publishes the first snapshot once synced is closed, then serves
// requests until ctx ends.
func (p *Pipeline) Run(ctx context.Context, synced <-chan struct{}) {
	select {
	case <-ctx.Done():
		return
	case <-synced:
	}
	p.mu.Lock()
	p.pending = nil // the first snapshot covers everything so far
	p.mu.Unlock()
	p.publish(&Request{Full: true, Start: time.Now(), Reasons: NewReasons(ReasonInitial)}, nil)
	close(p.ready)

	// pushed is when the last push was published: a change that finds
	// none for a Debounce period and no debounce running is the leading
	// edge (DebounceLeading).
	pushed := time.Now()
	var quiet, limit <-chan time.Time
	flush := func() {
		if p.flush() {
			pushed = time.Now()
		}
		quiet, limit = nil, nil
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.kick:
			p.mu.Lock()
			endpointOnly := p.pending != nil && !p.pending.Full
			p.mu.Unlock()
			if endpointOnly && p.opts.EndpointsBypassDebounce {
				flush()
				continue
			}
			if p.opts.DebounceLeading && quiet == nil && time.Since(pushed) >= p.opts.Debounce {
				flush()
				continue
			}
			quiet = time.After(p.opts.Debounce)
			if limit == nil {
				limit = time.After(p.opts.DebounceMax)
			}
		case <-quiet:
			flush()
		case <-limit:
			flush()
		}
	}
}

// flush publishes the pending request, if any, and reports whether it
// did.
func (p *Pipeline) flush() bool {
	p.mu.Lock()
	req := p.pending
	p.pending = nil
	var unindexed map[config.Kind]bool
	if req != nil {
		unindexed, p.unindexed = p.unindexed, nil
	}
	p.mu.Unlock()
	if req == nil {
		return false
	}
	kinds := req.KindsChanged()
	for k := range unindexed {
		if kinds == nil {
			kinds = map[config.Kind]bool{}
		}
		kinds[k] = true
	}
	p.publish(req, &Changed{Kinds: kinds, Services: len(req.Services) > 0, Mesh: req.Reasons.Has(ReasonMesh)})
	return true
}

func (p *Pipeline) publish(req *Request, changed *Changed) {
	pc := p.current.Load()
	if req.Full || pc == nil {
		start := time.Now()
		pc = Build(pc, Inputs{Store: p.store, Registry: p.registry, Mesh: p.mesh.Load(), Credentials: p.creds.Load(), TrustRoots: p.trustRoots(), JWKS: p.jwks.Load(), MeshNetworks: p.networks.Load(), GatewayNames: p.gatewayNames()}, changed, start)
		p.current.Store(pc)
		p.opts.Logger.Debug("snapshot built", "version", pc.Version, "took", time.Since(start), "services", len(pc.Services()))
	} else if changed != nil && len(changed.Kinds) > 0 {
		// An endpoint push: the changed ServiceEntries and
		// WorkloadEntries are re-indexed at once (see Reindex), so MCP
		// subscribers get them with their endpoints.
		pc = pc.Reindex(p.store, req.Configs, time.Now())
		p.current.Store(pc)
	}
	for _, l := range p.listeners {
		l(pc, req)
	}
}

// gatewayOnly reports whether a VirtualService (nil: absent) binds only to
// gateways, so sidecars cannot see it.
func gatewayOnly(c *config.Config) bool {
	if c == nil {
		return true
	}
	gws := c.Spec.(*networking.VirtualService).GetGateways()
	return len(gws) > 0 && !slices.Contains(gws, "mesh")
}
