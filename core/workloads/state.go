package workloads

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"time"

	"maps"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/baremesh/baremesh/core/cluster"
	"github.com/baremesh/baremesh/core/config"
	"google.golang.org/protobuf/proto"
	networking "istio.io/api/networking/v1alpha3"
)

// stateVersion is the persisted file's format.
const stateVersion = 1

type stateFile struct {
	Version int `json:"version"`
	// Entries are what a release before the one lifecycle reads when it
	// runs without replicas (its standalone path read only these, its
	// replicated path only Records). This release reads them only from
	// such a release's file (no Records), and writes them beside Records
	// so that a downgrade keeps the registrations in either mode
	// (TestStateReadableByThePreviousRelease).
	Entries []*entry `json:"entries"`
	// Records are the table's live records, restored into it at start
	// (Table.Restore).
	Records []cluster.Record `json:"records,omitempty"`
}

// load reads the persisted entries; a missing file is an empty state, a
// corrupt one a clear error (the daemon does not start over it silently).
func (c *Controller) load() ([]*entry, error) {
	if c.o.StateFile == "" {
		return nil, nil
	}
	s, err := readState(c.o.StateFile)
	if err != nil || s == nil {
		return nil, err
	}
	c.restored = s.Records
	// A temporary file of an older version's interrupted write.
	_ = os.Remove(c.o.StateFile + ".tmp")
	if len(s.Records) > 0 {
		return nil, nil // Entries are the same registrations, for a downgrade
	}
	return s.Entries, nil
}

// CheckStateFile reads an auto-registration state file as a start would
// (baremeshd check-config): nil if it is missing or good, else the error
// that would stop the daemon.
func CheckStateFile(path string) error {
	_, err := readState(path)
	return err
}

// readState reads and checks a state file (nil, nil when it is missing).
func readState(path string) (*stateFile, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("auto-registration state: %w", err)
	}
	var s stateFile
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("auto-registration state %s: %w (restore it from a backup, or move it away to start with no registrations: connected proxies register again)", path, err)
	}
	if s.Version > stateVersion {
		// A downgrade: this release would drop what it does not know
		// at its next save.
		return nil, fmt.Errorf("auto-registration state %s is of format %d, written by a later baremesh (this release reads format %d): refusing to start rather than rewrite it; run the later release, or restore the file from this release's backup", path, s.Version, stateVersion)
	}
	if s.Version != stateVersion {
		return nil, fmt.Errorf("auto-registration state %s: version %d, want %d", path, s.Version, stateVersion)
	}
	return &s, nil
}

// marshalLocked is the state file's content; c.mu is held. It is
// compact JSON: indenting 5,000 registrations (10 MB) doubled the time
// the lock was held.
func (c *Controller) marshalLocked() ([]byte, error) {
	s := stateFile{Version: stateVersion}
	for _, r := range c.records {
		s.Records = append(s.Records, r)
		if e := c.entries[r.Key]; e != nil {
			s.Entries = append(s.Entries, e)
		}
	}
	sort.Slice(s.Records, func(i, j int) bool { return s.Records[i].Key < s.Records[j].Key })
	sort.Slice(s.Entries, func(i, j int) bool { return s.Entries[i].key() < s.Entries[j].key() })
	return json.Marshal(s)
}

// writeState writes the state file atomically (temp file, rename), without
// c.mu: a write (its fsync) blocks no connect. A variable so that a test
// can hold a write in progress.
var writeState = func(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return writeAtomic(path, data)
}

// Retries of a failed state write: after saveRetryMin, doubling up to
// saveRetryMax, until one succeeds. Without them a registration made while
// the disk was full was not persisted until the next change, which may
// never come (issue #32).
const (
	saveRetryMin = time.Second
	saveRetryMax = 30 * time.Second
)

// savePending is the save timer's function: it writes the state.
func (c *Controller) savePending() { c.saveNow(false) }

// saveNow writes the state if a write is pending (or, with stop, marks
// the controller stopped and writes what is pending): the content is
// made under c.mu, written after it is released, and the outcome counted
// under it again; saveMu keeps the writes in order (it is taken before
// c.mu, never while holding it). A failed write is counted and retried
// (none after Stop).
func (c *Controller) saveNow(stop bool) {
	c.saveMu.Lock()
	defer c.saveMu.Unlock()
	c.mu.Lock()
	if stop {
		c.stopped = true
	}
	if c.saveTimer == nil {
		c.mu.Unlock()
		return // nothing pending, or Stop wrote it
	}
	c.saveTimer.Stop()
	c.saveTimer = nil
	if c.o.StateFile == "" {
		c.mu.Unlock()
		return
	}
	start := time.Now()
	data, err := c.marshalLocked()
	c.mu.Unlock()
	if err == nil {
		err = writeState(c.o.StateFile, data)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lastSave = time.Since(start)
	if err == nil {
		if c.saveFails > 0 {
			c.o.Logger.Info("auto-registration state saved again", "file", c.o.StateFile, "failed writes", c.saveFails)
			c.saveFails = 0
		}
		return
	}
	c.o.Metrics.saveFailed()
	c.saveFails++
	retry := min(saveRetryMax, saveRetryMin<<min(c.saveFails-1, 5))
	c.o.Logger.Warn("auto-registration state not saved; retrying", "file", c.o.StateFile, "in", retry, "err", err)
	if !c.stopped && c.saveTimer == nil {
		c.saveTimer = time.AfterFunc(retry, c.savePending)
	}
}

// saveAfterLocked is how long after a change the state is written: the
// changes within it are written once. saveDelay, or four times the last
// write when that was longer (a big table: a write of 5,000
// registrations took 2 s on a loaded 2-core machine), so that writing
// takes at most a fifth of the time; c.mu is held.
func (c *Controller) saveAfterLocked() time.Duration { return max(saveDelay, 4*c.lastSave) }

// writeAtomic writes data to a new temporary file beside path, syncs it
// and renames it over path; on any failure the temporary file is removed
// (a full disk left a 0-byte entries.json.tmp behind).
func writeAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	name := tmp.Name()
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Chmod(0o600)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(name, path)
	}
	if err != nil {
		_ = os.Remove(name)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func (c *Controller) sortedLocked() []*entry {
	out := make([]*entry, 0, len(c.entries))
	for _, e := range c.entries {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key() < out[j].key() })
	return out
}

// Registration is one auto-registered entry as the debug page shows it.
type Registration struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Group     string `json:"group"`
	Address   string `json:"address"`
	Connected bool   `json:"connected"`
	// Owner is, with replicas, the replica holding the proxy's connection.
	Owner          string    `json:"owner,omitempty"`
	Proxies        []string  `json:"proxies,omitempty"`
	ConnectedAt    time.Time `json:"connectedAt,omitzero"`
	DisconnectedAt time.Time `json:"disconnectedAt,omitzero"`
	// Health is "unknown" (no report yet), "healthy" or "unhealthy".
	Health       string `json:"health"`
	HealthDetail string `json:"healthDetail,omitempty"`
}

// Registrations returns every entry, sorted by namespace/name.
func (c *Controller) Registrations() []Registration {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Registration
	for _, e := range c.sortedLocked() {
		h := "unknown"
		if e.Healthy != nil {
			h = map[bool]string{true: "healthy", false: "unhealthy"}[*e.Healthy]
		}
		out = append(out, Registration{Namespace: e.Namespace, Name: e.Name, Group: e.Group, Address: e.Address,
			Connected: e.DisconnectedAt.IsZero(), Owner: e.owner, Proxies: e.Proxies, ConnectedAt: e.ConnectedAt, DisconnectedAt: e.DisconnectedAt,
			Health: h, HealthDetail: e.HealthDetail})
	}
	return out
}

// Handler serves /debug/registrationz: the entries as JSON.
func (c *Controller) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(map[string]any{"grace": c.o.Grace.String(), "allowUnauthenticated": c.o.AllowUnauthenticated,
			"registrations": c.Registrations()})
	})
}

// Metrics are the controller's counters. A nil *Metrics counts nothing.
type Metrics struct {
	registrations, unregistrations, ignored prometheus.Counter
	// saveFailures counts state writes that failed (a full disk, a
	// read-only file system); each is retried (saveLocked).
	saveFailures    prometheus.Counter
	refusals, flips *prometheus.CounterVec
}

// NewMetrics registers the counters with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		registrations:   prometheus.NewCounter(prometheus.CounterOpts{Name: "baremesh_autoregistrations_total", Help: "WorkloadEntries created for connecting proxies."}),
		unregistrations: prometheus.NewCounter(prometheus.CounterOpts{Name: "baremesh_autoregistration_removals_total", Help: "Auto-registered WorkloadEntries removed (grace period over, or group deleted)."}),
		ignored:         prometheus.NewCounter(prometheus.CounterOpts{Name: "baremesh_health_reports_ignored_total", Help: "Health reports from proxies without an auto-registered entry."}),
		saveFailures:    prometheus.NewCounter(prometheus.CounterOpts{Name: "baremesh_registration_state_save_failures_total", Help: "Failed writes of the auto-registration state file (stateDir/workloads/entries.json); each is retried."}),
		refusals:        prometheus.NewCounterVec(prometheus.CounterOpts{Name: "baremesh_autoregistration_refusals_total", Help: "Connections refused by auto-registration, by reason."}, []string{"reason"}),
		flips:           prometheus.NewCounterVec(prometheus.CounterOpts{Name: "baremesh_workload_health_changes_total", Help: "Health changes of auto-registered entries, by new state."}, []string{"healthy"}),
	}
	if reg != nil {
		reg.MustRegister(m.registrations, m.unregistrations, m.ignored, m.saveFailures, m.refusals, m.flips)
	}
	// Every label value's series from the start, at 0, so the first
	// refusal of a kind is an increase an alert sees: the reasons refused
	// is called with (workloads.go), both health states.
	for _, r := range []string{"no_group", "unauthenticated", "service_account", "no_address"} {
		m.refusals.WithLabelValues(r)
	}
	for _, h := range []string{"true", "false"} {
		m.flips.WithLabelValues(h)
	}
	return m
}

func (m *Metrics) registered() {
	if m != nil {
		m.registrations.Inc()
	}
}
func (m *Metrics) unregistered() {
	if m != nil {
		m.unregistrations.Inc()
	}
}
func (m *Metrics) saveFailed() {
	if m != nil {
		m.saveFailures.Inc()
	}
}
func (m *Metrics) ignoredReport() {
	if m != nil {
		m.ignored.Inc()
	}
}
func (m *Metrics) refused(reason string) {
	if m != nil {
		m.refusals.WithLabelValues(reason).Inc()
	}
}
func (m *Metrics) healthFlip(healthy bool) {
	if m != nil {
		m.flips.WithLabelValues(fmt.Sprint(healthy)).Inc()
	}
}

// built is a WorkloadEntry as persisted.
type built struct {
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Spec        json.RawMessage   `json:"spec"`
}

func newBuilt(c *config.Config) *built {
	spec, _ := protojson.Marshal(c.Spec)
	return &built{Labels: c.Labels, Annotations: c.Annotations, Spec: spec}
}

func (b *built) config(e *entry, source string) (config.Config, error) {
	if b == nil {
		return config.Config{}, errors.New("no built entry")
	}
	spec := &networking.WorkloadEntry{}
	if err := protojson.Unmarshal(b.Spec, spec); err != nil {
		return config.Config{}, err
	}
	ann := maps.Clone(b.Annotations)
	if ann == nil {
		ann = map[string]string{}
	}
	delete(ann, AnnotationConnectedAt)
	ann[AnnotationDisconnectedAt] = e.DisconnectedAt.UTC().Format(time.RFC3339Nano)
	return config.Config{Meta: config.Meta{GVK: config.SchemaFor(config.WorkloadEntry).GVK(), Namespace: e.Namespace, Name: e.Name,
		Labels: b.Labels, Annotations: ann, Source: config.Source{Name: source}}, Spec: spec}, nil
}

func protoCloneWE(t *networking.WorkloadEntry) *networking.WorkloadEntry {
	return proto.Clone(t).(*networking.WorkloadEntry)
}
