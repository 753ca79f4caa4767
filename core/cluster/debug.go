package cluster

import (
	"encoding/json"
	"net/http"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Entry is one registration as /debug/clusterz shows it.
type Entry struct {
	Key            string    `json:"key"`
	Owner          string    `json:"owner"`
	OwnerAlive     bool      `json:"ownerAlive"`
	Connected      bool      `json:"connected"`
	ClaimedAt      time.Time `json:"claimedAt"`
	DisconnectedAt time.Time `json:"disconnectedAt,omitzero"`
	// HeldHere counts this replica's connections for the key.
	HeldHere int             `json:"heldHere,omitempty"`
	Seq      uint64          `json:"seq"`
	Data     json.RawMessage `json:"data,omitempty"`
}

// Status is the /debug/clusterz page.
type Status struct {
	Self       string        `json:"self"`
	Addr       string        `json:"addr,omitempty"`
	Encrypted  bool          `json:"encrypted"`
	Grace      string        `json:"grace"`
	Members    []Member      `json:"members"`
	Entries    []Entry       `json:"entries"`
	Tombstones int           `json:"tombstones"`
	Queued     int           `json:"queuedBroadcasts"`
	Options    statusOptions `json:"options"`
}

type statusOptions struct {
	Seeds        []string `json:"seeds,omitempty"`
	ReapInterval string   `json:"reapInterval"`
	TombstoneTTL string   `json:"tombstoneTTL"`
}

// Status returns what /debug/clusterz shows.
func (t *Table) Status() Status {
	members := t.Members()
	alive := map[string]bool{}
	for _, m := range members {
		alive[m.Name] = true
	}
	s := Status{Self: t.name, Addr: t.Addr(), Encrypted: len(t.o.SecretKey) > 0, Grace: t.o.Grace.String(), Members: members,
		Options: statusOptions{Seeds: t.o.Seeds, ReapInterval: t.o.ReapInterval.String(), TombstoneTTL: t.o.TombstoneTTL.String()}}
	if t.queue != nil {
		s.Queued = t.queue.NumQueued()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	s.Entries = []Entry{}
	for _, r := range t.recs {
		if r.Deleted {
			s.Tombstones++
			continue
		}
		e := Entry{Key: r.Key, Owner: r.Owner, OwnerAlive: alive[r.Owner], Connected: r.Connected(),
			ClaimedAt: time.Unix(0, r.Stamp).UTC(), Seq: r.Seq, Data: r.Data}
		if r.DisconnectedAt != 0 {
			e.DisconnectedAt = time.Unix(0, r.DisconnectedAt).UTC()
		}
		if h := t.local[r.Key]; h != nil {
			e.HeldHere = h.conns
		}
		s.Entries = append(s.Entries, e)
	}
	sort.Slice(s.Entries, func(i, j int) bool { return s.Entries[i].Key < s.Entries[j].Key })
	return s
}

// Handler serves /debug/clusterz: members and every registration with its
// owner, as JSON.
func (t *Table) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(t.Status())
	})
}

// Metrics are the cluster's gauges and counters. A nil *Metrics counts
// nothing.
type Metrics struct {
	members       prometheus.GaugeFunc
	registrations prometheus.Gauge
	tombstones    prometheus.Gauge
	bytes         *prometheus.CounterVec
	bursts        prometheus.Counter
}

// NewMetrics registers the metrics with reg; members reads the member
// count (Table.NumMembers) when scraped.
func NewMetrics(reg prometheus.Registerer, members func() int) *Metrics {
	m := &Metrics{
		members: prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "baremesh_cluster_members", Help: "Live replicas in the cluster as this one sees it, itself included."},
			func() float64 { return float64(members()) }),
		registrations: prometheus.NewGauge(prometheus.GaugeOpts{Name: "baremesh_cluster_registrations", Help: "Live registrations in the replicated table."}),
		tombstones:    prometheus.NewGauge(prometheus.GaugeOpts{Name: "baremesh_cluster_tombstones", Help: "Removed registrations still remembered."}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "baremesh_cluster_gossip_bytes_total",
			Help: "Gossip payload bytes (before memberlist's framing, compression and encryption), by direction (queued, sent, received) and kind (broadcast, pushpull; direct: changes sent to each member over TCP; shared: shared values)."},
			[]string{"direction", "kind"}),
		bursts: prometheus.NewCounter(prometheus.CounterOpts{Name: "baremesh_cluster_burst_syncs_total",
			Help: "Whole-table syncs with every member run because a burst of registrations filled the gossip queue."}),
	}
	if reg != nil {
		reg.MustRegister(m.members, m.registrations, m.tombstones, m.bytes, m.bursts)
	}
	return m
}

// NumMembers is the live member count (1 without a cluster).
func (t *Table) NumMembers() int {
	if t.ml == nil {
		return 1
	}
	return t.ml.NumMembers()
}

func (m *Metrics) burstSync() {
	if m != nil {
		m.bursts.Inc()
	}
}
func (m *Metrics) queued(n int) {
	if m != nil {
		m.bytes.WithLabelValues("queued", "broadcast").Add(float64(n))
	}
}
func (m *Metrics) sent(kind string, n int) {
	if m != nil {
		m.bytes.WithLabelValues("sent", kind).Add(float64(n))
	}
}
func (m *Metrics) received(kind string, n int) {
	if m != nil {
		m.bytes.WithLabelValues("received", kind).Add(float64(n))
	}
}
func (m *Metrics) table(recs map[string]Record) {
	if m == nil {
		return
	}
	live, dead := 0, 0
	for _, r := range recs {
		if r.Deleted {
			dead++
		} else {
			live++
		}
	}
	m.registrations.Set(float64(live))
	m.tombstones.Set(float64(dead))
}
