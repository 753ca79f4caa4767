package daemon

import (
	"context"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/jwks"
	"github.com/baremesh/baremesh/core/push"
	"github.com/baremesh/baremesh/xdsserver/gen/authz"
)

// startJWKS wires the JWT key fetcher (core/jwks) beside the pipeline:
// every published snapshot says which jwksUris (and issuers without one)
// its RequestAuthentications need; the fetcher gets new ones at once and
// refreshes them every jwksRefresh; a change of keys is a push (reason
// "jwks"). Call before the pipeline runs (it adds a listener).
func (d *Daemon) startJWKS(ctx context.Context, goRun func(func())) {
	f := jwks.New(jwks.Options{
		Refresh: d.cfg.JWKSRefresh.Duration, Timeout: d.cfg.JWKSTimeout.Duration, MaxSize: d.cfg.JWKSMaxSize,
		Logger: d.log.With("component", "jwks"), OnChange: d.pipeline.SetJWKS,
	})
	d.jwks.Store(f)
	d.pipeline.AddListener(func(pc *push.PushContext, _ *push.Request) {
		ras := pc.Configs(config.RequestAuthentication)
		f.SetTimeouts(jwks.TimeoutsOf(ras))
		f.Want(jwks.SourcesOf(ras))
	})
	goRun(func() { f.Run(ctx) })
}

// authnProblems are the JWT key sets that could not be fetched and the
// CUSTOM policies whose provider cannot be used, on /debug/configz.
type authnProblems struct {
	JWKS   []jwks.Problem        `json:"jwks"`
	Custom []authz.CustomProblem `json:"custom"`
}

func (d *Daemon) authnProblems() authnProblems {
	out := authnProblems{JWKS: []jwks.Problem{}, Custom: authz.CustomProblems(d.pipeline.Current())}
	if f := d.jwks.Load(); f != nil {
		out.JWKS = f.Current().Problems()
	}
	return out
}
