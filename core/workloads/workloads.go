// Package workloads owns auto-registration: a proxy that connects with
// AUTO_REGISTER_GROUP in its node metadata gets a WorkloadEntry built from
// that WorkloadGroup's template (Istio's conventions: name, annotations,
// grace period after a disconnect), written to baremesh's own in-memory
// store (below every other source in precedence), its Healthy condition
// set from the health reports the proxy sends over its xDS stream. The
// entries follow their groups' changes (FollowGroups). With Registrations
// (a core/cluster table the replicas share) the table says which replica
// writes an entry and when it expires; without, the controller's own grace
// timers do. Entries and health persist in the state file, so a restart
// loses nothing.
//
// It imports core only (cluster, config, model, store); the xDS server
// calls it through its hooks, wired in internal/daemon.
package workloads

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/baremesh/baremesh/core/cluster"
	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/core/store"
)

// Istio's annotations on an auto-registered WorkloadEntry.
const (
	AnnotationGroup          = "istio.io/autoRegistrationGroup"
	AnnotationController     = "istio.io/workloadController"
	AnnotationConnectedAt    = "istio.io/connectedAt"
	AnnotationDisconnectedAt = "istio.io/disconnectedAt"
	// AnnotationHealthChecks marks entries of a group with a probe, as
	// Istio does.
	AnnotationHealthChecks = "proxy.istio.io/health-checks-enabled"
	// MetadataGroup is the node metadata key naming the WorkloadGroup.
	MetadataGroup = "AUTO_REGISTER_GROUP"
	// HealthType is the type URL of the health reports of Istio's agent
	// (pkg/model.HealthInfoType); LegacyHealthType is the one older
	// agents (and the issue) name.
	HealthType       = "type.googleapis.com/istio.v1.HealthInformation"
	LegacyHealthType = "istio.io/health"
)

// MetadataHealthReporter marks a proxy's stream that only reports its
// workload's health (baremesh-agent's): it keeps the entry connected and
// its reports count, but it never changes the entry's fields.
const MetadataHealthReporter = "BAREMESH_HEALTH_REPORTER"

// DefaultGrace is how long an entry outlives its proxy's disconnect.
const DefaultGrace = 10 * time.Second

// Options configure a Controller.
type Options struct {
	// Store is where entries are written (baremesh's own memory store,
	// attached to the aggregate below every other source).
	Store *store.Memory
	// Config reads WorkloadGroups and tells whose WorkloadEntry is in
	// force (the aggregate).
	Config ConfigReader
	// OwnSource is the aggregate's name for Store ("baremesh").
	OwnSource string
	// Grace is how long an entry stays after its last proxy disconnects
	// (0: DefaultGrace).
	Grace time.Duration
	// AllowUnauthenticated lets a proxy without an authenticated identity
	// (plaintext xDS) register; off, such a proxy is refused.
	AllowUnauthenticated bool
	// StateFile persists entries and health ("" keeps them in memory only).
	StateFile string
	// Controller is the istio.io/workloadController value (this daemon).
	Controller string
	Logger     *slog.Logger
	Metrics    *Metrics
	Now        func() time.Time
	// Registrations, if set, is the table replicated between replicas
	// (core/cluster): entries, owners and grace periods are the table's,
	// cluster-wide, and the controller's own timers and StateFile are not
	// used. Nil: this daemon alone decides (one replica).
	Registrations Registrations
}

// ConfigReader is what the controller needs of the aggregate.
type ConfigReader interface {
	store.Reader
	SourceOf(key config.Key) (string, bool)
}

// Controller registers proxies. Safe for concurrent use.
type Controller struct {
	o  Options
	mu sync.Mutex
	// entries are the entries this controller wrote, by namespace/name.
	entries map[string]*entry
	// byProxy maps a connection to its entry key.
	byProxy map[*model.Proxy]string
	timers  map[string]*time.Timer
	// held are, with Registrations, the entries this replica holds
	// connections for (what it claimed), by key.
	held map[string]*entry
	// records are, with Registrations, the table's live records as
	// persisted; restored are those read at start.
	records  map[string]cluster.Record
	restored []cluster.Record
	stopped  bool
	// saveTimer is the pending state write: changes within saveDelay are
	// written once (a connect storm would otherwise rewrite the whole file
	// per proxy).
	saveTimer *time.Timer
	// saveFails counts the failed writes since the last good one (the
	// retry's backoff).
	saveFails int
}

// saveDelay coalesces state writes.
const saveDelay = 100 * time.Millisecond

// entry is one auto-registered WorkloadEntry and its state.
type entry struct {
	Namespace      string            `json:"namespace"`
	Name           string            `json:"name"`
	Group          string            `json:"group"`
	Address        string            `json:"address"`
	Network        string            `json:"network,omitempty"`
	Locality       string            `json:"locality,omitempty"`
	ProxyLabels    map[string]string `json:"proxyLabels,omitempty"`
	ConnectedAt    time.Time         `json:"connectedAt,omitzero"`
	DisconnectedAt time.Time         `json:"disconnectedAt,omitzero"`
	// Healthy is nil until a report arrives.
	Healthy      *bool  `json:"healthy,omitempty"`
	HealthDetail string `json:"healthDetail,omitempty"`
	// conns are the proxies connected for this entry (two proxies may
	// claim the same address in a group: the entry stays while any does).
	conns map[*model.Proxy]struct{}
	// Proxies are their node IDs, for the debug page.
	Proxies []string `json:"proxies,omitempty"`
	// Built is the entry as last written, persisted so that a restart
	// serves it before the groups are read again.
	Built *built `json:"built,omitempty"`
	// owner is, with Registrations, the replica owning the entry.
	owner string
}

func (e *entry) key() string { return e.Namespace + "/" + e.Name }

// New returns a controller and loads the persisted entries: each starts
// disconnected (istio.io/disconnectedAt = now), with a full grace period
// for its proxy to come back.
func New(o Options) (*Controller, error) {
	if o.Grace <= 0 {
		o.Grace = DefaultGrace
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Controller == "" {
		o.Controller = "baremeshd"
	}
	c := &Controller{o: o, entries: map[string]*entry{}, byProxy: map[*model.Proxy]string{}, timers: map[string]*time.Timer{}, held: map[string]*entry{}}
	loaded, err := c.load()
	if err != nil {
		return nil, err
	}
	if o.Registrations != nil {
		// With replicas the table's records are what persists: restored
		// into the table, which gives this replica's own claims a full
		// grace period from now and takes a peer's newer word over them.
		c.records = map[string]cluster.Record{}
		o.Registrations.Watch(c.watch)
		if len(c.restored) > 0 {
			o.Registrations.Restore(c.restored)
			o.Logger.Info("replicated registrations restored; each waits a grace period for its proxy", "records", len(c.restored), "grace", o.Grace)
		}
		c.restored = nil
		return c, nil
	}
	now := o.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range loaded {
		e.conns = map[*model.Proxy]struct{}{}
		// The grace period runs from this start, however long the daemon
		// was down: its proxies could not reconnect meanwhile.
		e.DisconnectedAt = now
		e.Proxies = nil
		c.entries[e.key()] = e
		c.startGrace(e)
	}
	if len(loaded) > 0 {
		var cfgs []config.Config
		for _, e := range loaded {
			if cfg, err := e.Built.config(e, o.OwnSource); err != nil {
				o.Logger.Warn("persisted auto-registered entry unreadable; rebuilt once its group is read", "entry", e.key(), "err", err)
			} else {
				cfgs = append(cfgs, cfg)
			}
		}
		o.Store.Apply(cfgs, nil)
		o.Logger.Info("auto-registered entries restored; each waits a grace period for its proxy", "entries", len(loaded), "grace", o.Grace)
	}
	return c, nil
}

// RefusedError is a connection refused by auto-registration; the xDS
// server reports it as PermissionDenied.
type RefusedError struct{ Reason string }

func (e *RefusedError) Error() string { return "auto-registration refused: " + e.Reason }

// Connect registers p if it names a group. An error refuses the
// connection (a *RefusedError).
func (c *Controller) Connect(p *model.Proxy) error {
	group := p.Metadata[MetadataGroup]
	if group == "" {
		return nil
	}
	ns := p.Namespace
	wgc, ok := c.o.Config.Get(config.WorkloadGroup, ns, group)
	if !ok {
		c.o.Metrics.refused("no_group")
		return &RefusedError{fmt.Sprintf("WorkloadGroup %s/%s not found", ns, group)}
	}
	wg := wgc.Spec.(*networking.WorkloadGroup)
	sa := wg.GetTemplate().GetServiceAccount()
	if sa == "" {
		sa = "default"
	}
	switch id := p.Identity; {
	case id == nil && !c.o.AllowUnauthenticated:
		c.o.Metrics.refused("unauthenticated")
		return &RefusedError{fmt.Sprintf("proxy %s is not authenticated (plaintext xDS); auto-registration into %s/%s needs a certificate or token of service account %s (or allowUnauthenticatedRegistration)", p.ID, ns, group, sa)}
	case id != nil && (id.Namespace != ns || id.ServiceAccount != sa):
		c.o.Metrics.refused("service_account")
		return &RefusedError{fmt.Sprintf("proxy %s is authenticated as %s, but WorkloadGroup %s/%s runs as service account %s", p.ID, id.SPIFFEID(), ns, group, sa)}
	}
	if len(p.IPs) == 0 {
		c.o.Metrics.refused("no_address")
		return &RefusedError{fmt.Sprintf("proxy %s has no IP address in its node", p.ID)}
	}
	network := wg.GetTemplate().GetNetwork()
	if network == "" {
		network = p.Network
	}
	name := EntryName(group, p.IPs[0], network)
	key := ns + "/" + name
	if src, held := c.o.Config.SourceOf(config.Key{Kind: config.WorkloadEntry, Namespace: ns, Name: name}); held && src != c.o.OwnSource {
		// A hand-written entry of that name: never touched; the proxy
		// still connects.
		c.o.Logger.Info("not auto-registering: a WorkloadEntry of that name comes from another source", "proxy", p.ID, "entry", key, "source", src)
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.o.Registrations != nil {
		c.replicatedConnect(p, key, &entry{Namespace: ns, Name: name, Group: group, Address: p.IPs[0], Network: network,
			ProxyLabels: maps.Clone(p.Labels), Locality: localityString(p), ConnectedAt: c.o.Now()})
		return nil
	}
	e := c.entries[key]
	fresh := e == nil
	if fresh {
		e = &entry{Namespace: ns, Name: name, Group: group, conns: map[*model.Proxy]struct{}{}}
		c.entries[key] = e
	}
	// A health reporter (baremesh-agent beside an Envoy) joins the entry
	// its proxy made without changing it; it makes one only if it is
	// first, and the proxy's connection then fills it in.
	if fresh || p.Metadata[MetadataHealthReporter] != "true" {
		e.Address, e.Network, e.ProxyLabels = p.IPs[0], network, maps.Clone(p.Labels)
		e.Locality = localityString(p)
		e.ConnectedAt = c.o.Now()
	}
	e.DisconnectedAt = time.Time{}
	e.conns[p] = struct{}{}
	e.Proxies = proxyIDs(e.conns)
	c.byProxy[p] = key
	if t := c.timers[key]; t != nil {
		t.Stop()
		delete(c.timers, key)
	}
	if fresh {
		c.o.Metrics.registered()
		c.o.Logger.Info("auto-registered", "proxy", p.ID, "entry", key)
	}
	c.applyLocked([]string{key}, nil)
	return nil
}

// Disconnect marks p's entry disconnected once its last proxy has gone,
// and removes it after the grace period unless a proxy reconnects.
func (c *Controller) Disconnect(p *model.Proxy) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key, ok := c.byProxy[p]
	if !ok {
		return
	}
	delete(c.byProxy, p)
	if c.o.Registrations != nil {
		c.replicatedDisconnect(p, key)
		return
	}
	e := c.entries[key]
	if e == nil {
		return
	}
	delete(e.conns, p)
	e.Proxies = proxyIDs(e.conns)
	if len(e.conns) > 0 {
		return
	}
	e.DisconnectedAt = c.o.Now()
	c.startGrace(e)
	c.applyLocked([]string{key}, nil)
}

// startGrace arms e's removal; c.mu is held.
func (c *Controller) startGrace(e *entry) {
	key := e.key()
	if t := c.timers[key]; t != nil {
		t.Stop()
	}
	at := e.DisconnectedAt
	wait := c.o.Grace - c.o.Now().Sub(at)
	c.timers[key] = time.AfterFunc(max(wait, 0), func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.stopped {
			return
		}
		cur := c.entries[key]
		if cur == nil || len(cur.conns) > 0 || !cur.DisconnectedAt.Equal(at) {
			return // reconnected (maybe disconnected again: a newer timer runs)
		}
		delete(c.timers, key)
		c.o.Logger.Info("auto-registered entry removed: its proxy did not come back within the grace period", "entry", key, "grace", c.o.Grace)
		c.o.Metrics.unregistered()
		c.applyLocked(nil, []string{key})
	})
}

// Report handles a request of a type the xDS server does not generate:
// a health report sets the Healthy state of the proxy's entry; others,
// and reports of proxies without an entry, are logged and dropped.
func (c *Controller) Report(p *model.Proxy, typeURL string, errorDetail string, unhealthy bool) {
	if typeURL != HealthType && typeURL != LegacyHealthType {
		c.o.Logger.Debug("report of an unknown type ignored", "proxy", p.ID, "type", typeURL)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	key, ok := c.byProxy[p]
	if !ok {
		c.o.Logger.Info("health report ignored: the proxy is not auto-registered (no AUTO_REGISTER_GROUP, or a hand-written entry)", "proxy", p.ID)
		c.o.Metrics.ignoredReport()
		return
	}
	e := c.entries[key]
	if c.o.Registrations != nil {
		e = c.held[key]
	}
	if e == nil {
		c.o.Metrics.ignoredReport()
		return
	}
	healthy := !unhealthy
	if e.Healthy != nil && *e.Healthy == healthy && e.HealthDetail == errorDetail {
		return
	}
	if e.Healthy == nil || *e.Healthy != healthy {
		c.o.Metrics.healthFlip(healthy)
		c.o.Logger.Info("workload health changed", "entry", key, "healthy", healthy, "detail", errorDetail)
	}
	e.Healthy, e.HealthDetail = &healthy, errorDetail
	if c.o.Registrations != nil {
		if !c.o.Registrations.Update(key, e.payload()) {
			c.o.Logger.Info("health report kept for a later claim: another replica owns the entry now", "proxy", p.ID, "entry", key)
		}
		return
	}
	c.applyLocked([]string{key}, nil)
}

// Resync rebuilds every entry from its group's current template and
// removes the entries whose group is gone (call it when WorkloadGroups
// change; not from inside a store handler, it writes the store).
func (c *Controller) Resync() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.o.Registrations != nil {
		c.replicatedResync()
		return
	}
	var ups, dels []string
	for key, e := range c.entries {
		if _, ok := c.o.Config.Get(config.WorkloadGroup, e.Namespace, e.Group); !ok {
			c.o.Logger.Info("auto-registered entry removed: its WorkloadGroup is gone", "entry", key)
			c.o.Metrics.unregistered()
			dels = append(dels, key)
			continue
		}
		ups = append(ups, key)
	}
	c.applyLocked(ups, dels)
}

// Stop stops the grace timers (entries stay persisted for the next start).
func (c *Controller) Stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopped = true
	for _, t := range c.timers {
		t.Stop()
	}
	if c.saveTimer != nil {
		c.saveTimer.Stop()
		c.saveTimer = nil
		c.saveLocked()
	}
}

// applyLocked writes the named entries (rebuilt from their groups) and
// deletes dels, then persists; c.mu is held.
func (c *Controller) applyLocked(ups, dels []string) {
	var cfgs []config.Config
	var gone []config.Key
	for _, key := range dels {
		e := c.entries[key]
		if e == nil {
			continue
		}
		delete(c.entries, key)
		for p := range e.conns {
			delete(c.byProxy, p)
		}
		if t := c.timers[key]; t != nil {
			t.Stop()
			delete(c.timers, key)
		}
		gone = append(gone, config.Key{Kind: config.WorkloadEntry, Namespace: e.Namespace, Name: e.Name})
	}
	for _, key := range ups {
		e := c.entries[key]
		if e == nil {
			continue
		}
		wgc, ok := c.o.Config.Get(config.WorkloadGroup, e.Namespace, e.Group)
		if !ok {
			continue // Resync removes it
		}
		cfg := c.build(e, &wgc)
		e.Built = newBuilt(&cfg)
		cfgs = append(cfgs, cfg)
	}
	c.o.Store.Apply(cfgs, gone)
	c.scheduleSaveLocked()
}

// scheduleSaveLocked persists the state after saveDelay (writes are
// coalesced); c.mu is held. A failed write is retried (state.go).
func (c *Controller) scheduleSaveLocked() {
	if c.o.StateFile != "" && c.saveTimer == nil && !c.stopped {
		c.saveTimer = time.AfterFunc(saveDelay, c.savePending)
	}
}

// IsRefused reports whether err is a refusal by auto-registration.
func IsRefused(err error) bool {
	var r *RefusedError
	return errors.As(err, &r)
}
