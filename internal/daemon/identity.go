package daemon

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/grpc"
	meshv1alpha1 "istio.io/api/mesh/v1alpha1"
	"k8s.io/client-go/kubernetes"

	"github.com/baremesh/baremesh/core/identity"
	"github.com/baremesh/baremesh/internal/daemonconfig"
	"github.com/baremesh/baremesh/sources/kube"
	"github.com/baremesh/baremesh/xdsserver/ca"
	"github.com/baremesh/baremesh/xdsserver/tlsport"
)

// kubeClients is the Kubernetes source's clusters for the CA's token
// reviews (none until Run starts the source, or when it did not start).
type kubeClients struct{ d *Daemon }

func (k kubeClients) ClusterClient(id string) (kubernetes.Interface, string) {
	src := k.d.kube.Load()
	if src == nil {
		return nil, ""
	}
	return src.ClusterClient(id)
}

func (k kubeClients) ClusterIDs() []string {
	src := k.d.kube.Load()
	if src == nil {
		return nil
	}
	return src.ClusterIDs()
}

// DefaultTLSSANs are the TLS port certificate's names when tlsSANs is
// empty: the name Istio's agent checks, and this host's name.
func DefaultTLSSANs() []string {
	sans := []string{"istiod.istio-system.svc"}
	if h, err := os.Hostname(); err == nil && h != "" {
		sans = append(sans, h)
	}
	return sans
}

// maxTLSHeaderBytes bounds a call's headers on the TLS port.
const maxTLSHeaderBytes = 64 << 10

// identityParts is the CA, its authenticator and the TLS gRPC server the
// CA service runs on (authenticated xDS will be registered on the same
// server once the xDS server has its authenticator seam).
type identityParts struct {
	ca    *identity.CA
	authn identity.Authenticator
	// xdsAuthn is authn for xDS streams: a token is checked, not spent
	// (for the xDS server's Authenticate hook, not wired yet).
	xdsAuthn identity.Authenticator
	srv      *ca.Server
	// tokens is the join token store (shared with the cluster: trust.go).
	tokens *identity.TokenStore
	// peers are the TLS port's per-peer limits (failed
	// authentications, CSR rate), shared by the CA and xDS.
	peers *tlsport.Peers
	grpc  *grpc.Server
	lis   net.Listener
}

// setupIdentity loads (or on first start creates) the CA and opens the TLS
// port. With tlsAddr unset it does nothing.
func (d *Daemon) setupIdentity(mesh *meshv1alpha1.MeshConfig) error {
	if d.cfg.TLSAddr == "" {
		return nil
	}
	log := d.log.With("component", "ca")
	if d.sharesTrust() && d.cfg.CACertsDir == "" { // trust.go
		if err := identity.CheckStateDir(d.cfg.StateDir); err != nil {
			return err
		}
		if err := d.joinClusterCA(log); err != nil {
			return err
		}
	}
	if err := checkIdentityState(d.cfg, false); err != nil {
		return err
	}
	if err := identity.MarkStateFormat(d.cfg.StateDir); err != nil { // a downgrade refuses it
		return err
	}
	authority, err := identity.LoadCA(identity.CAOptions{Dir: d.cfg.CADir(), Plugged: d.cfg.CACertsDir != "", Organization: mesh.GetTrustDomain()})
	if err != nil {
		return err
	}
	if authority.Generated {
		log.Info("generated a self-signed root CA", "dir", d.cfg.CADir())
	}
	if d.sharesTrust() && d.cfg.CACertsDir == "" {
		if err := d.publishCA(); err != nil {
			return fmt.Errorf("sharing the CA with the cluster: %w", err)
		}
	}
	initialTD := mesh.GetTrustDomain()
	trustDomain := func() string {
		if pc := d.pipeline.Current(); pc != nil && pc.Mesh.GetTrustDomain() != "" {
			return pc.Mesh.GetTrustDomain()
		}
		return initialTD
	}
	tokens := &identity.TokenStore{Dir: filepath.Join(d.cfg.StateDir, "tokens")}
	p := &identityParts{ca: authority, tokens: tokens, authn: identity.Chain{
		&identity.CertAuthenticator{CA: authority},
		&identity.TokenAuthenticator{Store: tokens, TrustDomain: trustDomain},
	}}
	p.xdsAuthn = identity.Chain{
		&identity.CertAuthenticator{CA: authority},
		&identity.TokenAuthenticator{Store: tokens, TrustDomain: trustDomain, NoSpend: true},
	}
	if d.cfg.Clusters != "" {
		// Pods' agents: their service account tokens, reviewed by the
		// cluster they name. d.kube is set by Run before the TLS port
		// serves.
		kr := &kube.TokenReviewer{Clusters: kubeClients{d}, TrustDomain: trustDomain, Audiences: d.cfg.KubeTokenAudiences}
		p.authn = append(p.authn.(identity.Chain), kr)
		p.xdsAuthn = append(p.xdsAuthn.(identity.Chain), kr)
	}
	p.peers = tlsport.NewPeers(tlsport.Limits{}, log, d.reg)
	p.srv = ca.New(ca.Options{CA: authority, Authenticator: p.authn, TrustDomain: trustDomain,
		DefaultTTL: d.cfg.WorkloadCertTTL.Duration, MaxTTL: d.cfg.MaxWorkloadCertTTL.Duration,
		Logger: log, Registerer: d.reg, PreAuthenticator: p.xdsAuthn, Peers: p.peers})
	sans := d.cfg.TLSSANs
	if len(sans) == 0 {
		sans = DefaultTLSSANs()
	}
	tlsCfg, err := tlsport.ServerTLS(authority, sans)
	if err != nil {
		return fmt.Errorf("TLS port certificate: %w", err)
	}
	if p.lis, err = net.Listen("tcp", d.cfg.TLSAddr); err != nil {
		return fmt.Errorf("tls listener: %w", err)
	}
	// Both services on this port check the caller before they read a
	// message (the CA's stream handler, the xDS Authenticate hook), so
	// an unauthenticated caller costs no message buffer; its headers are
	// bounded here (a bearer token is a few KB; gRPC's default is 16 MB).
	p.grpc = grpc.NewServer(append(xdsServerOptions(d.cfg), grpc.Creds(tlsport.ServerCredentials(tlsCfg)), grpc.MaxHeaderListSize(maxTLSHeaderBytes))...)
	p.srv.Register(p.grpc)
	d.xds.Register(p.grpc) // authenticated xDS beside the CA (xdsauth.go)
	d.Handle("/debug/certz", p.srv.CertzHandler())
	d.id = p
	log.Info("CA ready", "dir", d.cfg.CADir(), "plugged", d.cfg.CACertsDir != "", "tokens", tokens.Dir, "sans", sans)
	return nil
}

// checkIdentityState checks what the CA and the token store would start
// from, before anything is created: the state directory's permissions; no
// new self-signed root where one was in use (identity.CheckCAPresent); a
// tokens.json that parses (else the first VM to join would find out).
// With cluster, a missing CA is not checked: a replica that shares the
// cluster's trust takes the cluster's CA at start (trust.go), which
// check-config, offline, cannot know.
func checkIdentityState(cfg daemonconfig.Config, cluster bool) error {
	if err := identity.CheckStateDir(cfg.StateDir); err != nil {
		return err
	}
	if cfg.CACertsDir == "" && !cluster {
		if err := identity.CheckCAPresent(cfg.StateDir, cfg.CADir()); err != nil {
			return err
		}
	}
	return identity.CheckTokenFile(filepath.Join(cfg.StateDir, "tokens"))
}

// checkCA checks the CA and token store baremeshd would load, without
// creating anything: a plugged-in directory must hold a good CA; a
// self-signed one may not exist yet (the first start makes it) but must be
// good if it does, and must exist if the state directory was used with one.
func checkCA(cfg daemonconfig.Config) error {
	if cfg.TLSAddr == "" {
		return nil
	}
	if err := checkIdentityState(cfg, cfg.Cluster.Enabled() && cfg.Cluster.KeyFile != ""); err != nil {
		return err
	}
	if cfg.CACertsDir == "" {
		if _, err := os.Stat(filepath.Join(cfg.CADir(), identity.CACertFile)); errors.Is(err, fs.ErrNotExist) {
			if _, err := os.Stat(filepath.Join(cfg.CADir(), identity.CAKeyFile)); errors.Is(err, fs.ErrNotExist) {
				return nil
			}
		}
	}
	_, err := identity.LoadCA(identity.CAOptions{Dir: cfg.CADir(), Plugged: true})
	return err
}

// TLSAddr is the bound TLS address ("" when the TLS port is off).
func (d *Daemon) TLSAddr() string {
	if d.id == nil {
		return ""
	}
	return d.id.lis.Addr().String()
}

// caReloadInterval is how often the CA directory is re-read: a root
// rotation step (baremeshctl ca rotate) reaches every replica reading the
// directory within it.
const caReloadInterval = time.Second

// watchCA re-reads the CA's files until ctx ends; a change (a rotation
// step) replaces what the CA signs with and trusts, and the new trust
// bundle goes to every proxy over PCDS. A half-written or bad set is
// logged (once per distinct error) and the last good CA stays.
func (p *identityParts) watchCA(ctx context.Context, d *Daemon) {
	log := d.log.With("component", "ca")
	t := time.NewTicker(caReloadInterval)
	defer t.Stop()
	lastErr := ""
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		changed, err := p.ca.Reload()
		if err != nil {
			if err.Error() != lastErr {
				log.Warn("CA files not reloaded; keeping the last good CA", "err", err)
			}
			lastErr = err.Error()
			continue
		}
		lastErr = ""
		if !changed {
			continue
		}
		var roots []string
		for _, r := range p.ca.TrustedRoots() {
			roots = append(roots, identity.Fingerprint(r))
		}
		log.Info("CA reloaded", "dir", d.cfg.CADir(), "trusted", roots, "signer", identity.Fingerprint(p.ca.SignerRoot()),
			"generation", p.ca.Generation())
		d.pipeline.SetTrustRoots(p.ca.RootPEM())
	}
}

func (p *identityParts) serve(log *slog.Logger) {
	if err := p.grpc.Serve(p.lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		log.Error("tls server stopped", "err", err)
	}
}
