package ads

import (
	"errors"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/xdstype"
)

// Reasoned is an Authorize refusal with a short reason for the
// baremesh_xds_reads_refused_total label; other errors count as
// "denied".
type Reasoned interface {
	error
	Reason() string
}

// guard wraps the generator of each uncached type in opts.Types with
// opts.Authorize: a proxy it refuses gets nothing of that type (an empty
// response, as istiod answers an SDS request without a verified
// identity), and the refusal is logged once per connection and type and
// counted in baremesh_xds_reads_refused_total{type,reason}. Cached types
// are not guarded: their generators see the cache key's proxy, not the
// caller; a type whose output depends on who asks must be NoCache (or
// hold the identity in its key). OnDisconnect is wrapped to forget the
// connection's refusals.
func guard(opts Options) Options {
	if opts.Authorize == nil {
		return opts
	}
	refused := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "baremesh_xds_reads_refused_total",
		Help: "xDS subscriptions refused by authorization (gateway credentials over SDS, Istio config over MCP), by type and reason (unauthenticated, namespace_mismatch, not_a_reader, ...); counted once per connection and type.",
	}, []string{"type", "reason"})
	if opts.Registerer != nil {
		opts.Registerer.MustRegister(refused)
	}
	var mu sync.Mutex
	seen := map[*model.Proxy]map[string]bool{} // connections' logged refusals
	authorize, log := opts.Authorize, opts.Logger
	types := make([]*xdstype.Type, len(opts.Types))
	for i, t := range opts.Types {
		types[i] = t
		if t.Cache != xdstype.NoCache {
			continue
		}
		g := t.Generate
		types[i] = t.With(func(in gen.Input) ([]gen.Resource, error) {
			err := authorize(in.Proxy, t)
			if err == nil {
				return g(in)
			}
			mu.Lock()
			first := !seen[in.Proxy][t.URL]
			if first {
				if seen[in.Proxy] == nil {
					seen[in.Proxy] = map[string]bool{}
				}
				seen[in.Proxy][t.URL] = true
			}
			mu.Unlock()
			if first {
				reason := "denied"
				var r Reasoned
				if errors.As(err, &r) {
					reason = r.Reason()
				}
				refused.WithLabelValues(t.Short, reason).Inc()
				log.Warn("xDS read refused", "proxy", in.Proxy.ID, "type", t.Short, "reason", reason,
					"identity", in.Proxy.Identity.SPIFFEIDOrEmpty(), "err", err)
			}
			return nil, nil
		})
	}
	opts.Types = types
	disconnect := opts.OnDisconnect
	opts.OnDisconnect = func(p *model.Proxy, reason error) {
		mu.Lock()
		delete(seen, p)
		mu.Unlock()
		if disconnect != nil {
			disconnect(p, reason)
		}
	}
	return opts
}
