package tlsport

import (
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
)

// Limits are the TLS port's per-peer limits, by peer IP address (a
// proxy's connections and streams share them). Zero fields take the
// defaults.
type Limits struct {
	// FailuresAllowed failed authentications (CA calls and xDS streams
	// alike) within FailureWindow throttle the peer for ThrottleFor: its
	// calls are refused before anything is read or checked. Defaults 10,
	// 1 minute, 1 minute.
	FailuresAllowed int
	FailureWindow   time.Duration
	ThrottleFor     time.Duration
	// CSRBurst certificate requests at once, then CSRPerMinute, per peer
	// (defaults 100 and 60: a host of many workloads, or a NAT, renews
	// at once after a restart; a loop of requests is cut).
	CSRBurst     int
	CSRPerMinute float64
}

func (l *Limits) defaults() {
	if l.FailuresAllowed <= 0 {
		l.FailuresAllowed = 10
	}
	if l.FailureWindow <= 0 {
		l.FailureWindow = time.Minute
	}
	if l.ThrottleFor <= 0 {
		l.ThrottleFor = time.Minute
	}
	if l.CSRBurst <= 0 {
		l.CSRBurst = 100
	}
	if l.CSRPerMinute <= 0 {
		l.CSRPerMinute = 60
	}
}

// Peers keeps the TLS port's per-peer state: failed authentications,
// throttling, the CSR rate. Safe for concurrent use; shared by the CA
// service and the authenticated xDS server on the same port.
type Peers struct {
	lim       Limits
	log       *slog.Logger
	throttled prometheus.Counter
	now       func() time.Time

	mu sync.Mutex
	m  map[string]*peerState
}

type peerState struct {
	failures []time.Time // within the window
	until    time.Time   // throttled until
	csr      *rate.Limiter
	seen     time.Time
}

// NewPeers makes the per-peer state; reg may be nil.
func NewPeers(lim Limits, log *slog.Logger, reg prometheus.Registerer) *Peers {
	lim.defaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Peers{lim: lim, log: log, now: time.Now, m: map[string]*peerState{},
		throttled: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "baremesh_tls_peers_throttled_total",
			Help: "Times a peer of the TLS port was throttled for repeated failed authentications (its CA calls and xDS streams refused for a while).",
		})}
	if reg != nil {
		reg.MustRegister(p.throttled)
	}
	return p
}

// host is a peer address's IP (the whole string if it has no port).
func host(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}

// state returns peer's state, making it; callers hold mu. Idle peers are
// forgotten now and then.
func (p *Peers) state(peer string, now time.Time) *peerState {
	s := p.m[peer]
	if s == nil {
		if len(p.m) >= 4096 {
			for k, v := range p.m {
				if now.Sub(v.seen) > p.lim.FailureWindow+p.lim.ThrottleFor && now.After(v.until) {
					delete(p.m, k)
				}
			}
		}
		s = &peerState{csr: rate.NewLimiter(rate.Limit(p.lim.CSRPerMinute/60), p.lim.CSRBurst)}
		p.m[peer] = s
	}
	s.seen = now
	return s
}

// Throttled says until when peer (an address) is refused, if it is.
func (p *Peers) Throttled(peer string) (time.Time, bool) {
	now := p.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.m[host(peer)]
	if s == nil || !now.Before(s.until) {
		return time.Time{}, false
	}
	return s.until, true
}

// Failed records a failed authentication of peer; the failure that goes
// over the allowance throttles it (logged and counted once).
func (p *Peers) Failed(peer, reason string) {
	now := p.now()
	h := host(peer)
	p.mu.Lock()
	s := p.state(h, now)
	cut := 0
	for cut < len(s.failures) && now.Sub(s.failures[cut]) > p.lim.FailureWindow {
		cut++
	}
	s.failures = append(s.failures[cut:], now)
	throttle := len(s.failures) > p.lim.FailuresAllowed && !now.Before(s.until)
	if throttle {
		s.until, s.failures = now.Add(p.lim.ThrottleFor), nil
	}
	p.mu.Unlock()
	if throttle {
		p.throttled.Inc()
		p.log.Warn("TLS peer throttled after repeated failed authentications", "peer", h, "failures", p.lim.FailuresAllowed+1,
			"window", p.lim.FailureWindow, "for", p.lim.ThrottleFor, "lastReason", reason)
	}
}

// AllowCSR takes one certificate request from peer's allowance.
func (p *Peers) AllowCSR(peer string) bool {
	now := p.now()
	p.mu.Lock()
	s := p.state(host(peer), now)
	p.mu.Unlock()
	return s.csr.AllowN(now, 1)
}
