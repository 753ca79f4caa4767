package daemon

import (
	"context"
	"net"
	"path/filepath"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/baremesh/baremesh/core/identity"
	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/core/workloads"
	"github.com/baremesh/baremesh/xdsserver/ads"
	"github.com/baremesh/baremesh/xdsserver/gen/istioconfig"
	"github.com/baremesh/baremesh/xdsserver/gen/sds"
	"github.com/baremesh/baremesh/xdsserver/tlsport"
	"github.com/baremesh/baremesh/xdsserver/xdstype"
)

// ownSource is the aggregate's name for baremesh's own state.
const ownSource = "baremesh"

// xdsHooks are the xDS server's connection hooks: authentication on the
// TLS port (identity.go), auto-registration, and who may read gateway
// credentials (SDS) and the Istio config (MCP). The node's claims against
// its identity are the server's own check (ads/auth.go).
func (d *Daemon) xdsHooks() ads.Hooks {
	return ads.Hooks{
		Authenticate: d.authenticateXDS,
		OnConnect: func(ctx context.Context, p *model.Proxy, _ net.Addr, id *model.Identity) error {
			if err := d.wl.Connect(p); err != nil {
				return status.Error(codes.PermissionDenied, err.Error())
			}
			return nil
		},
		OnDisconnect: func(p *model.Proxy, _ error) { d.wl.Disconnect(p) },
		OnReport: func(p *model.Proxy, r ads.Report) {
			d.wl.Report(p, r.TypeURL, r.ErrorDetail.GetMessage(), r.ErrorDetail != nil)
		},
		Authorize: d.authorizeRead,
	}
}

// authorizeRead is who may read what beyond their own config: gateway
// credentials only their namespace's authenticated identities (sds),
// the Istio config only control-plane identities (istioconfig.Readers:
// the root namespace's, mcpReaders, plaintext with
// allowPlaintextMCPReaders).
func (d *Daemon) authorizeRead(p *model.Proxy, t *xdstype.Type) error {
	switch {
	case t == xdstype.Secret:
		return sds.Authorize(p)
	case slices.Contains(xdstype.IstioConfig, t):
		var root string
		if pc := d.pipeline.Current(); pc != nil {
			root = pc.Mesh.GetRootNamespace()
		}
		return istioconfig.Readers{Identities: d.cfg.MCPReaders, AllowPlaintext: d.cfg.AllowPlaintextMCPReaders}.Authorize(p, root)
	}
	return nil
}

// authenticateXDS identifies a caller on the TLS port by its client
// certificate or bearer join token (checked, not spent); a plaintext
// stream (the loopback xdsAddr) is unauthenticated.
func (d *Daemon) authenticateXDS(ctx context.Context) (*model.Identity, error) {
	pr, ok := peer.FromContext(ctx)
	if !ok || d.id == nil {
		return nil, nil
	}
	if _, tls := pr.AuthInfo.(credentials.TLSInfo); !tls {
		return nil, nil
	}
	if until, ok := d.id.peers.Throttled(pr.Addr.String()); ok {
		return nil, status.Errorf(codes.ResourceExhausted, "throttled: peer throttled until %s after repeated failed authentications", until.UTC().Format(time.RFC3339))
	}
	c, err := d.id.xdsAuthn.Authenticate(ctx, tlsport.CredentialsFromContext(ctx))
	if err != nil {
		if !identity.IsAuthError(err) {
			return nil, status.Errorf(codes.Unavailable, "authentication: %v", err)
		}
		d.id.peers.Failed(pr.Addr.String(), identity.Reason(err))
		d.log.Info("xDS stream refused", "peer", pr.Addr, "reason", identity.Reason(err), "err", err)
		return nil, status.Errorf(codes.Unauthenticated, "%s: %v", identity.Reason(err), err)
	}
	return &model.Identity{TrustDomain: c.ID.TrustDomain, Namespace: c.ID.Namespace, ServiceAccount: c.ID.ServiceAccount, Method: c.Method}, nil
}

// setupWorkloads makes the auto-registration controller, its debug page
// and metrics.
func (d *Daemon) setupWorkloads() error {
	var stateFile string
	if d.cfg.StateDir != "" {
		stateFile = filepath.Join(d.cfg.StateDir, "workloads", "entries.json")
	}
	// Entries, owners and grace periods are the table's; its records are
	// what every replica serves.
	wl, err := workloads.New(workloads.Options{
		Registrations: d.cluster,
		Store:         d.own, Config: d.agg, OwnSource: ownSource, Grace: d.cfg.RegistrationGrace.Duration,
		AllowUnauthenticated: d.cfg.AllowUnauthenticatedRegistration, StateFile: stateFile,
		Controller: "baremeshd@" + d.cluster.Name(), Logger: d.log.With("component", "workloads"), Metrics: workloads.NewMetrics(d.reg),
	})
	if err != nil {
		return err
	}
	d.wl = wl
	d.Handle("/debug/registrationz", wl.Handler())
	return nil
}
