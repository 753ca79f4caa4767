// Package workloads owns auto-registration: a proxy that connects with
// AUTO_REGISTER_GROUP in its node metadata gets a WorkloadEntry built from
// that WorkloadGroup's template (Istio's conventions: name, annotations,
// grace period after a disconnect), written to baremesh's own in-memory
// store (below every other source in precedence), its Healthy condition
// set from the health reports the proxy sends over its xDS stream. The
// entries follow their groups' changes (FollowGroups). There is one
// lifecycle, over Registrations (a core/cluster table; a daemon without
// replicas has a table of one): the controller claims an entry when its
// proxy connects and releases it when the stream ends; the table says
// which replica owns it and removes it when the grace period ends, and
// every replica writes the table's entries to its store (lifecycle.go).
// The table's records persist in the state file, so a restart loses
// nothing.
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
	// (0: DefaultGrace), for the debug page and logs: the table enforces
	// it (core/cluster Options.Grace).
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
	// Registrations is the registration table (required; core/cluster,
	// a table of one without replicas): entries, owners and grace periods
	// are the table's.
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
	// held are the entries this replica holds connections for (what it
	// claimed), by key.
	held map[string]*entry
	// records are the table's live records as persisted (lifecycle.go);
	// restored are those read at start.
	records  map[string]cluster.Record
	restored []cluster.Record
	// resynced: the groups have been read (the first Resync); before,
	// an entry whose group is not known yet is served as persisted.
	resynced bool
	stopped  bool
	// saveTimer is the pending state write: changes within saveDelay are
	// written once (a connect storm would otherwise rewrite the whole file
	// per proxy).
	saveTimer *time.Timer
	// saveFails counts the failed writes since the last good one (the
	// retry's backoff); lastSave is how long the last write took.
	saveFails int
	lastSave  time.Duration
	// saveMu orders the state writes (state.go: saveNow).
	saveMu sync.Mutex
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
	// owner is the replica owning the entry.
	owner string
}

func (e *entry) key() string { return e.Namespace + "/" + e.Name }

// New returns a controller and restores the persisted records into the
// table: each of this replica's starts disconnected as of now, with a full
// grace period for its proxy to come back (Table.Restore), and is served
// as it was last built until its group is read.
func New(o Options) (*Controller, error) {
	if o.Registrations == nil {
		return nil, errors.New("auto-registration: Options.Registrations is required (a core/cluster table; one replica is a table of one)")
	}
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
	c := &Controller{o: o, entries: map[string]*entry{}, byProxy: map[*model.Proxy]string{}, held: map[string]*entry{},
		records: map[string]cluster.Record{}}
	loaded, err := c.load()
	if err != nil {
		return nil, err
	}
	restored := c.restored
	c.restored = nil
	for _, e := range loaded {
		// A state file written before the one lifecycle (one replica,
		// its own timers): its entries become this replica's records.
		restored = append(restored, e.record(o.Registrations.Name()))
	}
	o.Registrations.Watch(c.watch)
	if len(restored) > 0 {
		o.Registrations.Restore(restored)
		o.Logger.Info("auto-registered entries restored; each waits a grace period for its proxy", "entries", len(restored), "grace", o.Grace)
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
	c.connectLocked(p, key, &entry{Namespace: ns, Name: name, Group: group, Address: p.IPs[0], Network: network,
		ProxyLabels: maps.Clone(p.Labels), Locality: localityString(p), ConnectedAt: c.o.Now()})
	return nil
}

// Disconnect releases p's claim: once the entry's last proxy has gone
// (from every replica), the table marks it disconnected and removes it
// after the grace period unless a proxy reconnects.
func (c *Controller) Disconnect(p *model.Proxy) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key, ok := c.byProxy[p]
	if !ok {
		return
	}
	delete(c.byProxy, p)
	c.releaseLocked(p, key)
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
	e := c.held[key]
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
	if !c.o.Registrations.Update(key, e.payload()) {
		c.o.Logger.Info("health report kept for a later claim: another replica owns the entry now", "proxy", p.ID, "entry", key)
	}
}

// Resync rebuilds every entry from its group's current template and
// removes, cluster-wide, the entries whose group is gone (call it when
// WorkloadGroups change; not from inside a store handler, it writes the
// store).
func (c *Controller) Resync() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.resynced = true
	var ups []string
	for key, e := range c.entries {
		if _, ok := c.o.Config.Get(config.WorkloadGroup, e.Namespace, e.Group); !ok {
			c.o.Logger.Info("auto-registered entry removed: its WorkloadGroup is gone", "entry", key)
			c.o.Registrations.Delete(key) // the tombstone comes back through watch
			continue
		}
		ups = append(ups, key)
	}
	for key, h := range c.held {
		if _, ok := c.o.Config.Get(config.WorkloadGroup, h.Namespace, h.Group); !ok {
			delete(c.held, key)
			c.o.Registrations.Delete(key)
		}
	}
	c.applyLocked(ups, nil)
}

// Stop stops following the table and writes the pending state (entries
// stay persisted for the next start). The table is the caller's to stop.
func (c *Controller) Stop() { c.saveNow(true) }

// Abandon stops the controller without writing: a start that fails after
// New (the daemon refusing its state directory) leaves the state file as
// it found it, where a pending save would have rewritten it later.
func (c *Controller) Abandon() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopped = true
	if c.saveTimer != nil {
		c.saveTimer.Stop()
		c.saveTimer = nil
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
		gone = append(gone, config.Key{Kind: config.WorkloadEntry, Namespace: e.Namespace, Name: e.Name})
	}
	for _, key := range ups {
		e := c.entries[key]
		if e == nil {
			continue
		}
		wgc, ok := c.o.Config.Get(config.WorkloadGroup, e.Namespace, e.Group)
		if !ok {
			// Before the groups are read (a restart), the entry as last
			// built; after, Resync removes it.
			if cfg, ok := c.persistedConfig(e); ok {
				cfgs = append(cfgs, cfg)
			}
			continue
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
		c.saveTimer = time.AfterFunc(c.saveAfterLocked(), c.savePending)
	}
}

// IsRefused reports whether err is a refusal by auto-registration.
func IsRefused(err error) bool {
	var r *RefusedError
	return errors.As(err, &r)
}
