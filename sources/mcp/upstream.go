package mcp

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"

	"github.com/baremesh/baremesh/core/store"
)

// Upstream is one MCP upstream feeding a Sink. Run it once.
type Upstream struct {
	cfg      UpstreamConfig
	opts     Options
	sink     store.Sink
	log      *slog.Logger
	typeURLs []string
	st       *state
	status   statusBox
	synced   bool            // the sink was told (markSynced)
	answered bool            // every subscription was answered once
	origins  map[string]bool // problem origins last reported to the sink
}

// SourceName is the name an upstream's Configs carry: "mcp:NAME".
func SourceName(name string) string { return "mcp:" + name }

// New returns an Upstream for cfg (validated by the caller) delivering to
// sink.
func New(cfg UpstreamConfig, opts Options, sink store.Sink) *Upstream {
	opts.setDefaults()
	u := &Upstream{cfg: cfg, opts: opts, sink: sink, typeURLs: cfg.typeURLs(), origins: map[string]bool{},
		log: opts.Logger.With("upstream", cfg.Name, "address", cfg.Address)}
	u.st = newState(SourceName(cfg.Name), u.typeURLs)
	proto := "sotw"
	if cfg.Delta {
		proto = "delta"
	}
	u.status.s = Status{Name: cfg.Name, Address: cfg.Address, Protocol: proto, Resources: map[string]int{}}
	return u
}

// Status returns the upstream's current status.
func (u *Upstream) Status() Status { return u.status.get() }

// Run follows the upstream until ctx ends: it (re)connects with backoff
// and jitter, keeping the last good state while the upstream is down.
func (u *Upstream) Run(ctx context.Context) error {
	syncTimer := time.NewTimer(u.opts.SyncTimeout)
	defer syncTimer.Stop()
	backoff := u.opts.BackoffMin
	for {
		began := time.Now()
		answered, err := u.session(ctx, syncTimer.C)
		u.setConnected(false)
		if ctx.Err() != nil {
			return nil
		}
		// A stream that was answered, or lived a while (a Delta server owes
		// no answer when the versions held are current), was healthy.
		if answered || time.Since(began) > 5*time.Second {
			backoff = u.opts.BackoffMin
		}
		u.status.update(func(s *Status) { s.Reconnects++; s.LastError = err.Error() })
		if m := u.opts.Metrics; m != nil {
			m.reconnects.WithLabelValues(u.cfg.Name).Inc()
		}
		u.log.Warn("mcp upstream stream ended; keeping its last good state and redialling", "err", err, "in", backoff)
		u.setStreamProblem(fmt.Sprintf("stream ended: %v; keeping the last good state, redialling", err))
		// ±25% jitter, so upstreams and daemons do not redial in step.
		wait := time.Duration(float64(backoff) * (0.75 + rand.Float64()/2))
		select {
		case <-ctx.Done():
			return nil
		case <-syncTimer.C:
			u.markSynced(true)
			syncTimer.Reset(time.Hour * 24 * 365)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(wait):
			}
		case <-time.After(wait):
		}
		backoff = min(backoff*2, u.opts.BackoffMax)
	}
}

// session runs one ADS stream until it fails. answered says the upstream
// answered at least once, so the backoff starts over.
func (u *Upstream) session(ctx context.Context, syncTimeout <-chan time.Time) (answered bool, err error) {
	creds, err := u.cfg.transportCredentials()
	if err != nil {
		return false, err
	}
	maxMsg := u.cfg.MaxMessageSize
	if maxMsg == 0 {
		maxMsg = 256 << 20
	}
	dialOpts := append([]grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMsg)),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 30 * time.Second, Timeout: 10 * time.Second}),
	}, u.opts.DialOptions...)
	cc, err := grpc.NewClient(u.cfg.HostPort(), dialOpts...)
	if err != nil {
		return false, fmt.Errorf("dial %s: %w", u.cfg.Address, err)
	}
	defer cc.Close()
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, err := openStream(sctx, cc, u.cfg.Delta, u.node())
	if err != nil {
		return false, fmt.Errorf("open stream: %w", err)
	}
	// An answer is owed for every type, except a Delta resubscription
	// that sent the versions held: the server may stay silent when they
	// are current.
	owed := 0
	for _, t := range u.typeURLs {
		held := u.st.versions(t)
		if !u.cfg.Delta || held == nil {
			owed++
		}
		if err := s.subscribe(t, held); err != nil {
			return false, fmt.Errorf("subscribe %s: %w", t, err)
		}
	}
	// The stream opened on a ready transport and took every subscription.
	u.setConnected(true)
	type recvd struct {
		r   *response
		err error
	}
	ch := make(chan recvd, 1)
	go func() {
		for {
			r, err := s.recv()
			select {
			case ch <- recvd{r, err}:
			case <-sctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	var timeout <-chan time.Time
	if owed > 0 {
		t := time.NewTimer(u.opts.ResponseTimeout)
		defer t.Stop()
		timeout = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return answered, ctx.Err()
		case <-syncTimeout:
			u.markSynced(true)
			syncTimeout = nil
		case <-timeout:
			return answered, fmt.Errorf("%w within %v of subscribing", errNoResponse, u.opts.ResponseTimeout)
		case m := <-ch:
			if m.err != nil {
				return answered, m.err
			}
			if !answered {
				answered = true
				timeout = nil
			}
			if err := u.handle(s, m.r); err != nil {
				return answered, err
			}
		}
	}
}

func (u *Upstream) node() *core.Node {
	id := u.cfg.NodeID
	if id == "" {
		// Istio parses the id as type~ip~pod.namespace~domain.
		id = "sidecar~127.0.0.1~baremesh.baremesh~baremesh.svc.cluster.local"
	}
	return &core.Node{Id: id, UserAgentName: "baremesh"}
}

// handle applies one response, delivers the difference and ACKs or NACKs.
func (u *Upstream) handle(s stream, r *response) error {
	now := time.Now()
	ups, dels, nack := u.st.apply(r, now)
	if len(ups) > 0 || len(dels) > 0 {
		u.sink.Update(ups, dels)
	}
	u.publishProblems(true) // the stream answers: its own problem is over
	counts := u.st.counts()
	u.status.update(func(st *Status) {
		st.LastResponse, st.Resources = now, counts
		st.Responses++
		if nack != nil {
			st.NACKs++
			st.LastNACK = &NACK{TypeURL: r.typeURL, Nonce: r.nonce, Reason: nack.Error(), Time: now}
		}
	})
	if m := u.opts.Metrics; m != nil {
		m.lastResponse.WithLabelValues(u.cfg.Name).Set(float64(now.UnixNano()) / 1e9)
		m.responses.WithLabelValues(u.cfg.Name).Inc()
		for k, n := range counts {
			m.resources.WithLabelValues(u.cfg.Name, k).Set(float64(n))
		}
		if nack != nil {
			m.nacks.WithLabelValues(u.cfg.Name, r.typeURL).Inc()
		}
	}
	if nack != nil {
		u.log.Warn("mcp response refused (NACK); refused resources keep their last good version", "type", r.typeURL, "err", nack)
	} else {
		u.log.Debug("mcp response applied", "type", r.typeURL, "resources", len(r.items), "upserts", len(ups), "deletes", len(dels))
	}
	if !u.answered && u.st.allResponded() {
		u.markSynced(false)
	}
	if err := s.ack(r, nack); err != nil {
		return fmt.Errorf("ack %s: %w", r.typeURL, err)
	}
	return nil
}

// markSynced tells the sink the upstream is synced: when it has answered
// every subscription, or, timedOut, when SyncTimeout passed without that
// (so the daemon serves). Status.Synced says only the first: an upstream
// that never answered shows synced: false and syncTimedOut: true on
// /debug/configz, until it answers.
func (u *Upstream) markSynced(timedOut bool) {
	if timedOut {
		if u.synced {
			return
		}
		u.log.Warn("mcp upstream has not answered every subscription; reporting synced so the daemon serves", "after", u.opts.SyncTimeout)
		u.status.update(func(s *Status) { s.SyncTimedOut = true })
	} else {
		u.answered = true
		u.status.update(func(s *Status) { s.Synced, s.SyncTimedOut = true, false })
	}
	if !u.synced {
		u.synced = true
		u.sink.Synced()
	}
}

func (u *Upstream) setConnected(c bool) {
	u.status.update(func(s *Status) { s.Connected = c })
	if m := u.opts.Metrics; m != nil {
		v := 0.0
		if c {
			v = 1
		}
		m.connected.WithLabelValues(u.cfg.Name).Set(v)
	}
}

// streamOrigin is the problem origin of the upstream itself.
func (u *Upstream) streamOrigin() string { return u.cfg.Name + " (" + u.cfg.Address + ")" }

// setStreamProblem reports (or with "" clears) a problem of the stream.
func (u *Upstream) setStreamProblem(msg string) {
	if msg == "" {
		delete(u.st.problems, "")
	} else if p, ok := u.st.problems[""]; !ok || p.Error != msg {
		u.st.problems[""] = store.Problem{Error: msg, Since: time.Now()}
	}
	u.publishProblems(false)
}

// publishProblems hands the problems to the sink, one origin per
// resource or type URL ("NAME: ServiceEntry/ns/a") and one for the
// stream; answered clears the stream's.
func (u *Upstream) publishProblems(answered bool) {
	if answered {
		delete(u.st.problems, "")
	}
	now := map[string]bool{}
	for k, p := range u.st.problems {
		origin := u.streamOrigin()
		if k != "" {
			origin = u.cfg.Name + ": " + k
		}
		now[origin] = true
		u.sink.SetProblems(origin, []store.Problem{p})
	}
	for o := range u.origins {
		if !now[o] {
			u.sink.SetProblems(o, nil)
		}
	}
	u.origins = now
}
