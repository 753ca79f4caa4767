package kube

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the Kubernetes source's Prometheus metrics. A nil *Metrics
// records nothing.
type Metrics struct {
	up, synced        *prometheus.GaugeVec
	updates           *prometheus.CounterVec
	kubeconfigErrors  prometheus.Counter
	invalidIstioInput *prometheus.CounterVec
}

// NewMetrics registers the metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		up: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "baremesh_kube_cluster_up",
			Help: "1 while the cluster's API server answers, 0 while it does not (its last good state stays in force).",
		}, []string{"cluster"}),
		synced: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "baremesh_kube_cluster_synced",
			Help: "1 once the cluster's informers have synced and its state was delivered.",
		}, []string{"cluster"}),
		updates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "baremesh_kube_updates_total",
			Help: "Batches of Kubernetes changes delivered to the service model and the config store.",
		}, []string{"cluster"}),
		kubeconfigErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "baremesh_kube_kubeconfig_errors_total",
			Help: "Kubeconfig files refused (the cluster keeps its last good connection, if any).",
		}),
		invalidIstioInput: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "baremesh_kube_istio_config_rejects_total",
			Help: "Istio resources read from a cluster and refused by validation.",
		}, []string{"cluster"}),
	}
	if reg != nil {
		reg.MustRegister(m.up, m.synced, m.updates, m.kubeconfigErrors, m.invalidIstioInput)
	}
	return m
}

func (m *Metrics) setUp(cluster string, up bool) {
	if m != nil {
		m.up.WithLabelValues(cluster).Set(b2f(up))
	}
}

// started gives a cluster its series as it starts: not synced yet, and
// counters at 0, so that "never synced" is a 0 an alert can see (not an
// absent series) and a counter's first increase is an increase.
func (m *Metrics) started(cluster string) {
	if m != nil {
		m.synced.WithLabelValues(cluster).Set(0)
		m.updates.WithLabelValues(cluster)
		m.invalidIstioInput.WithLabelValues(cluster)
	}
}

func (m *Metrics) setSynced(cluster string, synced bool) {
	if m != nil {
		m.synced.WithLabelValues(cluster).Set(b2f(synced))
	}
}

func (m *Metrics) update(cluster string) {
	if m != nil {
		m.updates.WithLabelValues(cluster).Inc()
	}
}

func (m *Metrics) kubeconfigError() {
	if m != nil {
		m.kubeconfigErrors.Inc()
	}
}

func (m *Metrics) istioReject(cluster string) {
	if m != nil {
		m.invalidIstioInput.WithLabelValues(cluster).Inc()
	}
}

func (m *Metrics) forget(cluster string) {
	if m != nil {
		m.up.DeleteLabelValues(cluster)
		m.synced.DeleteLabelValues(cluster)
		m.updates.DeleteLabelValues(cluster)
		m.invalidIstioInput.DeleteLabelValues(cluster)
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
