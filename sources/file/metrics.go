package file

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the file source's Prometheus metrics. A nil *Metrics records
// nothing.
type Metrics struct {
	rejects   *prometheus.CounterVec
	rejecting *prometheus.GaugeVec
	resources *prometheus.GaugeVec
	files     *prometheus.GaugeVec
}

// NewMetrics registers the metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		rejects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "baremesh_config_file_rejects_total",
			Help: "Times a config file was rejected (parse or validation error); its last good resources stayed in force.",
		}, []string{"source"}),
		rejecting: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "baremesh_config_files_rejected",
			Help: "Config files whose current content is rejected.",
		}, []string{"source"}),
		resources: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "baremesh_config_file_resources",
			Help: "Resources held by the config files of a source.",
		}, []string{"source"}),
		files: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "baremesh_config_files",
			Help: "Config files a source reads.",
		}, []string{"source"}),
	}
	reg.MustRegister(m.rejects, m.rejecting, m.resources, m.files)
	return m
}

func (m *Metrics) rejected(source string) {
	if m != nil {
		m.rejects.WithLabelValues(source).Inc()
	}
}

func (m *Metrics) observe(w *Watcher) {
	if m == nil {
		return
	}
	bad := 0
	for _, f := range w.files {
		if len(f.problems) > 0 {
			bad++
		}
	}
	m.rejecting.WithLabelValues(w.opts.Name).Set(float64(bad))
	m.resources.WithLabelValues(w.opts.Name).Set(float64(len(w.current)))
	m.files.WithLabelValues(w.opts.Name).Set(float64(len(w.files)))
}
