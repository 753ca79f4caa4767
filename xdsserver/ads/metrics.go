package ads

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/baremesh/baremesh/xdsserver/xdstype"
)

type metrics struct {
	connected prometheus.Gauge
	pushes    *prometheus.CounterVec
	pushBytes *prometheus.CounterVec
	nacks     *prometheus.CounterVec
	requests  *prometheus.CounterVec
	genTime   *prometheus.HistogramVec
	// convergence: from the change to the proxy's ACK of it.
	convergence *prometheus.HistogramVec
	// streamEnds counts ended streams by reason (streamend.go).
	streamEnds *prometheus.CounterVec
	// Flow control (flow.go): streams refused by a cap, sends that gave
	// their slot back, streams ended by the send timeout.
	refused      *prometheus.CounterVec
	slowSends    prometheus.Counter
	sendTimeouts prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		connected: prometheus.NewGauge(prometheus.GaugeOpts{Name: "baremesh_xds_connected_proxies", Help: "xDS streams open now."}),
		pushes:    prometheus.NewCounterVec(prometheus.CounterOpts{Name: "baremesh_xds_pushes_total", Help: "xDS responses sent, by type."}, []string{"type"}),
		pushBytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "baremesh_xds_push_bytes_total", Help: "Bytes of xDS responses sent, by type."}, []string{"type"}),
		nacks:     prometheus.NewCounterVec(prometheus.CounterOpts{Name: "baremesh_xds_nacks_total", Help: "xDS responses proxies rejected, by type."}, []string{"type"}),
		requests:  prometheus.NewCounterVec(prometheus.CounterOpts{Name: "baremesh_xds_requests_total", Help: "xDS requests received, by type and kind (request, ack, stale; NACKs are counted in baremesh_xds_nacks_total)."}, []string{"type", "kind"}),
		genTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "baremesh_xds_generate_seconds", Help: "Time to generate one type for one proxy.",
			Buckets: prometheus.ExponentialBuckets(0.00005, 2, 16),
		}, []string{"type"}),
	}
	m.convergence = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "baremesh_xds_convergence_seconds", Help: "From a config change to the proxy's ACK of the response that carried it, by type.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .075, .1, .15, .2, .3, .4, .5, .75, 1, 1.5, 2, 3, 5, 10, 20, 30, 60},
	}, []string{"type"})
	m.streamEnds = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "baremesh_xds_stream_ends_total",
		Help: "xDS streams ended, by reason: client_closed, client_cancel, transport (keepalive, reset), recv_error, send_error, send_timeout, other."}, []string{"reason"})
	m.refused = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "baremesh_xds_streams_refused_total",
		Help: "xDS streams refused because a cap was reached, by cap: per_connection, per_peer, first_request (no request in time)."}, []string{"cap"})
	m.slowSends = prometheus.NewCounter(prometheus.CounterOpts{Name: "baremesh_xds_slow_sends_total",
		Help: "xDS responses not accepted within the slow-send time (their send slot went to other proxies)."})
	m.sendTimeouts = prometheus.NewCounter(prometheus.CounterOpts{Name: "baremesh_xds_send_timeouts_total",
		Help: "xDS streams ended because no response was accepted for the send timeout (the proxy did not read)."})
	if reg != nil {
		reg.MustRegister(m.connected, m.pushes, m.pushBytes, m.nacks, m.requests, m.genTime, m.convergence, m.streamEnds,
			m.refused, m.slowSends, m.sendTimeouts)
	}
	return m
}

// zero gives every label value known up front its series at 0: NACKs per
// served type, stream ends per reason, refusals per cap. An alert on
// increase() sees a counter's first event only if the series existed
// before it (a series born at 1 has increased by nothing).
func (m *metrics) zero(types []*xdstype.Type) {
	for _, t := range types {
		m.nacks.WithLabelValues(t.Short)
	}
	for _, r := range []string{endClientClosed, endCanceled, endTransport, endRecvError, endSendError, endSendTimeout, endOther} {
		m.streamEnds.WithLabelValues(r)
	}
	for _, c := range []string{"per_connection", "per_peer", "first_request"} {
		m.refused.WithLabelValues(c)
	}
}
