package workloads

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/baremesh/baremesh/core/cluster"
	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/model"
)

// Registrations is the replicated table of entries (core/cluster.Table).
// With it, the controller only claims and releases; which entries exist,
// who owns them and when a disconnected one goes is the table's, the same
// on every replica, and the store follows what Watch delivers.
type Registrations interface {
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
	c.records[r.Key] = r
	c.applyLocked([]string{r.Key}, nil)
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

// replicatedConnect is Connect's bookkeeping with a table; c.mu is held.
func (c *Controller) replicatedConnect(p *model.Proxy, key string, e *entry) {
	h := c.held[key]
	if h == nil {
		h = &entry{conns: map[*model.Proxy]struct{}{}}
		c.held[key] = h
	}
	conns := h.conns
	healthy, detail := h.Healthy, h.HealthDetail
	*h = *e
	h.conns, h.Healthy, h.HealthDetail = conns, healthy, detail
	h.conns[p] = struct{}{}
	h.Proxies = proxyIDs(h.conns)
	c.byProxy[p] = key
	c.claimLocked(key, h)
}

// replicatedDisconnect releases p's claim; c.mu is held.
func (c *Controller) replicatedDisconnect(p *model.Proxy, key string) {
	if h := c.held[key]; h != nil {
		delete(h.conns, p)
		h.Proxies = proxyIDs(h.conns)
		if len(h.conns) == 0 {
			delete(c.held, key)
		}
	}
	c.o.Registrations.Release(key)
}

// replicatedResync deletes, cluster-wide, the entries whose group is gone
// and rebuilds the others; c.mu is held.
func (c *Controller) replicatedResync() {
	var ups []string
	for key, e := range c.entries {
		if _, ok := c.o.Config.Get(config.WorkloadGroup, e.Namespace, e.Group); !ok {
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
