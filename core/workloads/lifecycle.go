// The one registration lifecycle, over the table (core/cluster).

package workloads

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/baremesh/baremesh/core/cluster"
	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/model"
)

// Registrations is the table of entries (core/cluster.Table, replicated
// or of one replica). The controller only claims and releases; which
// entries exist, who owns them and when a disconnected one goes is the
// table's, the same on every replica, and the store follows what Watch
// delivers.
type Registrations interface {
	Name() string                                 // this replica's name, the owner of its claims
	Claim(key string, data json.RawMessage)       // a proxy for key connected here
	Update(key string, data json.RawMessage) bool // health changed (owner only; false: not ours)
	Release(key string)                           // that proxy's stream ended
	Delete(key string)                            // its group is gone
	Watch(func(cluster.Record))                   // every key's winning record, in order
	Restore([]cluster.Record)                     // records persisted before a restart
}

var _ Registrations = (*cluster.Table)(nil)

// payload is an entry as replicated: its fields, not its conns or the
// built WorkloadEntry (every replica builds from its own copy of the group).
func (e *entry) payload() json.RawMessage {
	p := *e
	p.conns, p.Proxies, p.Built, p.DisconnectedAt = nil, nil, nil, time.Time{}
	data, _ := json.Marshal(&p)
	return data
}

// persisted is an entry as the state file keeps it in its record: the
// payload and the WorkloadEntry last built, served after a restart until
// the groups are read.
func (e *entry) persisted() json.RawMessage {
	p := *e
	p.conns, p.Proxies, p.DisconnectedAt = nil, nil, time.Time{}
	data, _ := json.Marshal(&p)
	return data
}

// record is an entry of a state file written before the one lifecycle,
// as this replica's record (Restore gives it a grace period from now).
func (e *entry) record(owner string) cluster.Record {
	stamp := int64(1)
	if !e.ConnectedAt.IsZero() {
		stamp = e.ConnectedAt.UnixNano()
	}
	return cluster.Record{Key: e.key(), Owner: owner, Stamp: stamp, Data: e.persisted()}
}

// persistedConfig is e's WorkloadEntry as last built (persisted), before
// the groups are read; false after, or when there is none.
func (c *Controller) persistedConfig(e *entry) (config.Config, bool) {
	if c.resynced || e.Built == nil {
		return config.Config{}, false
	}
	cfg, err := e.Built.config(e, c.o.OwnSource)
	if err != nil {
		c.o.Logger.Warn("persisted auto-registered entry unreadable; rebuilt once its group is read", "entry", e.key(), "err", err)
		return config.Config{}, false
	}
	if e.DisconnectedAt.IsZero() {
		delete(cfg.Annotations, AnnotationDisconnectedAt)
	}
	return cfg, true
}

// claimLocked claims a held entry in the table (Connect); c.mu is held.
// Table calls never call back into the controller (Watch delivers on its
// own goroutine), so holding c.mu keeps the claims of one key in order.
func (c *Controller) claimLocked(key string, e *entry) {
	c.o.Registrations.Claim(key, e.payload())
}

// watch follows the table: every winning record becomes the store's
// WorkloadEntry (owner as istio.io/workloadController, disconnectedAt
// from the record), every tombstone removes it.
func (c *Controller) watch(r cluster.Record) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return
	}
	if r.Deleted {
		delete(c.records, r.Key)
		c.scheduleSaveLocked()
		if _, ok := c.entries[r.Key]; ok {
			c.o.Logger.Info("auto-registered entry removed", "entry", r.Key, "owner", r.Owner)
			c.o.Metrics.unregistered()
			c.applyLocked(nil, []string{r.Key})
		}
		return
	}
	e := &entry{}
	if err := json.Unmarshal(r.Data, e); err != nil || e.Namespace+"/"+e.Name != r.Key {
		c.o.Logger.Warn("replicated registration unreadable; ignored", "entry", r.Key, "owner", r.Owner, "err", err)
		return
	}
	if _, ok := c.entries[r.Key]; !ok {
		c.o.Metrics.registered()
		c.o.Logger.Info("auto-registered", "entry", r.Key, "owner", r.Owner)
	}
	e.owner = r.Owner
	if r.DisconnectedAt != 0 {
		e.DisconnectedAt = time.Unix(0, r.DisconnectedAt)
	}
	if h := c.held[r.Key]; h != nil {
		e.Proxies = h.Proxies
	}
	c.entries[r.Key] = e
	c.applyLocked([]string{r.Key}, nil)
	r.Data = e.persisted()
	c.records[r.Key] = r
}

// controllerFor is the istio.io/workloadController value of an entry
// owned by replica owner ("" : this daemon).
func (c *Controller) controllerFor(owner string) string {
	if owner == "" {
		return c.o.Controller
	}
	prefix, _, ok := strings.Cut(c.o.Controller, "@")
	if !ok {
		return owner
	}
	return prefix + "@" + owner
}

// connectLocked holds p's connection for key and claims the entry e
// describes; c.mu is held. A health reporter (baremesh-agent beside an
// Envoy) joins the entry as it is without changing it; it makes one only
// if it is first, and the proxy's connection then fills it in.
func (c *Controller) connectLocked(p *model.Proxy, key string, e *entry) {
	h := c.held[key]
	if h == nil {
		h = &entry{conns: map[*model.Proxy]struct{}{}}
		if cur := c.entries[key]; cur != nil {
			// The table's entry (restored, or claimed elsewhere): its
			// health stays until a report here.
			h.Healthy, h.HealthDetail = cur.Healthy, cur.HealthDetail
			if p.Metadata[MetadataHealthReporter] == "true" {
				e = cur
			}
		}
		c.held[key] = h
	} else if p.Metadata[MetadataHealthReporter] == "true" {
		e = h
	}
	conns := h.conns
	healthy, detail := h.Healthy, h.HealthDetail
	fields := *e
	*h = fields
	h.DisconnectedAt, h.owner, h.Built = time.Time{}, "", nil
	h.conns, h.Healthy, h.HealthDetail = conns, healthy, detail
	h.conns[p] = struct{}{}
	h.Proxies = proxyIDs(h.conns)
	if cur := c.entries[key]; cur != nil {
		cur.Proxies = h.Proxies
	}
	c.byProxy[p] = key
	c.claimLocked(key, h)
}

// releaseLocked releases p's claim on key; c.mu is held.
func (c *Controller) releaseLocked(p *model.Proxy, key string) {
	if h := c.held[key]; h != nil {
		delete(h.conns, p)
		h.Proxies = proxyIDs(h.conns)
		if e := c.entries[key]; e != nil {
			e.Proxies = h.Proxies
		}
		if len(h.conns) == 0 {
			delete(c.held, key)
		}
	}
	c.o.Registrations.Release(key)
}
