package mcp

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Status is what /debug/configz shows of one upstream.
type Status struct {
	Name      string `json:"name"`
	Address   string `json:"address"`
	Protocol  string `json:"protocol"` // "sotw" or "delta"
	Connected bool   `json:"connected"`
	// Synced: the upstream answered every subscription at least once.
	Synced bool `json:"synced"`
	// SyncTimedOut: it had not by SyncTimeout, and the daemon was told
	// to serve without it.
	SyncTimedOut bool `json:"syncTimedOut,omitempty"`
	// LastResponse is when the upstream last answered (zero: never).
	LastResponse time.Time `json:"lastResponse,omitzero"`
	// Resources held per kind: the last good state, kept while down.
	Resources  map[string]int `json:"resources"`
	Responses  uint64         `json:"responses"`
	NACKs      uint64         `json:"nacks"`
	LastNACK   *NACK          `json:"lastNack,omitempty"`
	Reconnects uint64         `json:"reconnects"`
	// LastError is why the last stream ended or could not start.
	LastError string `json:"lastError,omitempty"`
}

// NACK is one refused response.
type NACK struct {
	TypeURL string    `json:"typeUrl"`
	Nonce   string    `json:"nonce"`
	Reason  string    `json:"reason"`
	Time    time.Time `json:"time"`
}

// statusBox guards a Status shared between Run and readers.
type statusBox struct {
	mu sync.Mutex
	s  Status
}

func (b *statusBox) update(f func(s *Status)) {
	b.mu.Lock()
	f(&b.s)
	b.mu.Unlock()
}

func (b *statusBox) get() Status {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := b.s
	out.Resources = make(map[string]int, len(b.s.Resources))
	for k, v := range b.s.Resources {
		out.Resources[k] = v
	}
	if b.s.LastNACK != nil {
		n := *b.s.LastNACK
		out.LastNACK = &n
	}
	return out
}

// Metrics are the MCP source's Prometheus metrics, labelled by upstream
// name. A nil *Metrics records nothing.
type Metrics struct {
	connected    *prometheus.GaugeVec
	lastResponse *prometheus.GaugeVec
	resources    *prometheus.GaugeVec
	responses    *prometheus.CounterVec
	nacks        *prometheus.CounterVec
	reconnects   *prometheus.CounterVec
}

// NewMetrics registers the metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		connected: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "baremesh_mcp_upstream_connected", Help: "1 while the ADS stream to an MCP upstream is open.",
		}, []string{"upstream"}),
		lastResponse: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "baremesh_mcp_upstream_last_response_timestamp_seconds", Help: "When an MCP upstream last answered (Unix seconds).",
		}, []string{"upstream"}),
		resources: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "baremesh_mcp_upstream_resources", Help: "Resources held from an MCP upstream (its last good state), per kind.",
		}, []string{"upstream", "kind"}),
		responses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "baremesh_mcp_upstream_responses_total", Help: "Responses received from an MCP upstream.",
		}, []string{"upstream"}),
		nacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "baremesh_mcp_upstream_nacks_total", Help: "Responses of an MCP upstream refused (NACKed); the reason is on /debug/configz.",
		}, []string{"upstream", "type_url"}),
		reconnects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "baremesh_mcp_upstream_reconnects_total", Help: "Times the stream to an MCP upstream ended or failed to open and was redialled.",
		}, []string{"upstream"}),
	}
	reg.MustRegister(m.connected, m.lastResponse, m.resources, m.responses, m.nacks, m.reconnects)
	return m
}
