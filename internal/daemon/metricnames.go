package daemon

import (
	"slices"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// registry is the daemon's Prometheus registry; it remembers the name of
// every metric family registered, so MetricNames can list the ones a
// scrape does not show yet (a vector has no series before its first use),
// and every collector, so that /metrics gathers them in turn on one
// goroutine (Gatherer).
type registry struct {
	*prometheus.Registry
	mu         sync.Mutex
	names      map[string]bool
	collectors []prometheus.Collector
	gatherer   *prometheus.Registry
}

func newRegistry() *registry {
	r := &registry{Registry: prometheus.NewRegistry(), names: map[string]bool{}, gatherer: prometheus.NewRegistry()}
	r.gatherer.MustRegister(inTurn{r})
	return r
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
	r.collectors = append(r.collectors, c)
	return nil
}

// Unregister implements prometheus.Registerer.
func (r *registry) Unregister(c prometheus.Collector) bool {
	if !r.Registry.Unregister(c) {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.collectors = slices.DeleteFunc(r.collectors, func(x prometheus.Collector) bool { return x == c })
	return true
}

// Gatherer is what /metrics serves: the registered collectors, gathered
// in turn on one goroutine. prometheus.Registry.Gather starts a goroutine
// per collector and yields the processor (runtime.Gosched) after
// starting each; during a full push to 2,000 proxies every yield waited
// behind the push's runnable goroutines, so a scrape waited as many
// times as there are collectors (issue #30: /metrics took up to 1.3 s
// from a process of its own, of which 2.8 s in 4 s of trace were
// Gather's yields). The registry above still checks each collector as
// it is registered.
func (r *registry) Gatherer() prometheus.Gatherer { return r.gatherer }

// inTurn collects every collector of r, one after the other. It describes
// nothing (an unchecked collector): r's own registry checked each
// collector's descriptions when it was registered, and Gather checks the
// metrics themselves as for any collector.
type inTurn struct{ r *registry }

func (inTurn) Describe(chan<- *prometheus.Desc) {}

func (c inTurn) Collect(ch chan<- prometheus.Metric) {
	c.r.mu.Lock()
	cs := slices.Clone(c.r.collectors)
	c.r.mu.Unlock()
	for _, x := range cs {
		x.Collect(ch)
	}
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
