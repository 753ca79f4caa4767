package ca

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/baremesh/baremesh/core/identity"
)

type metrics struct {
	issued    *prometheus.CounterVec
	refused   *prometheus.CounterVec
	tokenUses prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) metrics {
	m := metrics{
		issued: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "baremesh_ca_certs_issued_total",
			Help: "Workload certificates issued, by how the caller authenticated (token, client-cert, kube-token).",
		}, []string{"method"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "baremesh_ca_requests_refused_total",
			Help: "Certificate requests refused, by reason (token_expired, token_revoked, token_used_up, token_bad_secret, token_unknown, token_malformed, cert_untrusted, cert_expired, no_credentials, identity_mismatch, kube_token_invalid, kube_token_audience, kube_token_not_sa, kube_cluster_unknown, kube_review_failed, csr_*, throttled (a peer throttled for failed authentications), rate_limited (a peer over its CSR rate)...).",
		}, []string{"reason"}),
		tokenUses: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "baremesh_ca_token_uses_total",
			Help: "Join token uses spent (successful token authentications).",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.issued, m.refused, m.tokenUses)
	}
	// Every authentication method's series from the start, at 0 (the
	// refusal reasons are too many to list; their series come with use).
	for _, method := range []string{identity.MethodToken, identity.MethodClientCert, identity.MethodKubeToken} {
		m.issued.WithLabelValues(method)
	}
	return m
}
