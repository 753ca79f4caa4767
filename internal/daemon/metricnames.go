package daemon

import (
	"slices"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// registry is the daemon's Prometheus registry; it remembers the name of
// every metric family registered, so MetricNames can list the ones a
// scrape does not show yet (a vector has no series before its first use).
type registry struct {
	*prometheus.Registry
	mu    sync.Mutex
	names map[string]bool
}

func newRegistry() *registry {
	return &registry{Registry: prometheus.NewRegistry(), names: map[string]bool{}}
}

// Register implements prometheus.Registerer.
func (r *registry) Register(c prometheus.Collector) error {
	if err := r.Registry.Register(c); err != nil {
		return err
	}
	descs := make(chan *prometheus.Desc, 16)
	go func() { c.Describe(descs); close(descs) }()
	r.mu.Lock()
	defer r.mu.Unlock()
	for d := range descs {
		r.names[descName(d)] = true
	}
	return nil
}

// MustRegister implements prometheus.Registerer.
func (r *registry) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

// MetricNames lists the metric families registered with the daemon, sorted,
// whether or not they have a series yet (the dashboard and alert rules
// under examples/ are checked against it and against a scrape).
func (d *Daemon) MetricNames() []string {
	d.reg.mu.Lock()
	defer d.reg.mu.Unlock()
	var out []string
	for n := range d.reg.names {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// descName is d's fully-qualified name; client_golang exposes it only in
// String ("Desc{fqName: \"name\", ...}").
func descName(d *prometheus.Desc) string {
	s := d.String()
	const key = `fqName: "`
	i := strings.Index(s, key)
	if i < 0 {
		return s
	}
	s = s[i+len(key):]
	if j := strings.IndexByte(s, '"'); j >= 0 {
		s = s[:j]
	}
	return s
}
