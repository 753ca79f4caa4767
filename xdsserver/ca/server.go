// Package ca serves Istio's certificate service
// (istio.v1.auth.IstioCertificateService, CreateCertificate) on baremeshd's
// TLS port: it authenticates the caller (join token or client certificate,
// through an identity.Authenticator), checks that the CSR asks for the
// caller's own identity, signs it with the mesh CA and returns the chain as
// istiod does (leaf, intermediates..., root last). It also makes the TLS
// listener's configuration and keeps the /debug/certz record.
//
// It imports core only (core/identity), never sources or other xdsserver
// packages.
package ca

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	pb "istio.io/api/security/v1alpha1"

	"github.com/baremesh/baremesh/core/identity"
)

// Options configure a Server.
type Options struct {
	CA            *identity.CA
	Authenticator identity.Authenticator
	// TrustDomain returns the mesh's current trust domain (it follows the
	// mesh config). A CSR must ask for it.
	TrustDomain func() string
	// DefaultTTL is used when a request asks for none (default 24h);
	// longer requests are cut to MaxTTL (default 90 days).
	DefaultTTL, MaxTTL time.Duration
	Logger             *slog.Logger
	Registerer         prometheus.Registerer
	// CertzSize is how many issued certificates /debug/certz keeps (1000).
	CertzSize int
}

// Server implements IstioCertificateServiceServer. Safe for concurrent use.
type Server struct {
	pb.UnimplementedIstioCertificateServiceServer
	opts    Options
	log     *slog.Logger
	metrics metrics
	certz   *certz
}

var _ pb.IstioCertificateServiceServer = (*Server)(nil)

// New builds a Server; opts.CA, Authenticator and TrustDomain are required.
func New(opts Options) *Server {
	if opts.DefaultTTL <= 0 {
		opts.DefaultTTL = identity.DefaultWorkloadTTL
	}
	if opts.MaxTTL <= 0 {
		opts.MaxTTL = 90 * 24 * time.Hour
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.CertzSize <= 0 {
		opts.CertzSize = 1000
	}
	return &Server{opts: opts, log: opts.Logger, metrics: newMetrics(opts.Registerer), certz: newCertz(opts.CertzSize)}
}

// Register adds the service to a gRPC server (the TLS one: a bearer token
// must not travel in plaintext).
func (s *Server) Register(g *grpc.Server) { pb.RegisterIstioCertificateServiceServer(g, s) }

// CreateCertificate implements IstioCertificateServiceServer. The CSR is
// checked before the caller is authenticated, so a malformed request never
// spends a join token's use.
func (s *Server) CreateCertificate(ctx context.Context, req *pb.IstioCertificateRequest) (*pb.IstioCertificateResponse, error) {
	creds := CredentialsFromContext(ctx)
	log := s.log.With("peer", creds.Peer)
	csr, want, err := identity.ParseCSR([]byte(req.GetCsr()))
	if err != nil {
		return nil, s.refuse(log, codes.InvalidArgument, err)
	}
	caller, err := s.opts.Authenticator.Authenticate(ctx, creds)
	if err != nil {
		code := codes.Unauthenticated
		if identity.Retryable(err) {
			code = codes.Unavailable
		}
		return nil, s.refuse(log, code, fmt.Errorf("authentication failed: %w", err))
	}
	if caller.Method == identity.MethodToken {
		s.metrics.tokenUses.Inc()
	}
	log = log.With("caller", caller.ID.String(), "method", caller.Method, "with", caller.Detail)
	if td := s.opts.TrustDomain(); want.TrustDomain != td || !want.SameWorkload(caller.ID) {
		return nil, s.refuse(log, codes.PermissionDenied, fmt.Errorf("%w: CSR asks for %s, caller is %s",
			identity.ErrIdentityMismatch, want, identity.ID{TrustDomain: td, Namespace: caller.ID.Namespace, ServiceAccount: caller.ID.ServiceAccount}))
	}
	ttl := time.Duration(req.GetValidityDuration()) * time.Second
	switch {
	case req.GetValidityDuration() <= 0:
		ttl = s.opts.DefaultTTL
	case req.GetValidityDuration() > int64(s.opts.MaxTTL/time.Second):
		ttl = s.opts.MaxTTL
	}
	issued, err := s.opts.CA.SignWorkload(csr, want, ttl)
	if err != nil {
		return nil, s.refuse(log, codes.Internal, err)
	}
	s.metrics.issued.WithLabelValues(caller.Method).Inc()
	s.certz.add(Record{
		Identity: want.String(), Serial: issued.Cert.SerialNumber.Text(16), NotAfter: issued.Cert.NotAfter,
		Issued: time.Now().UTC(), Method: caller.Method, With: caller.Detail, Group: caller.Group, Peer: creds.Peer,
	})
	log.Info("certificate issued", "identity", want.String(), "serial", issued.Cert.SerialNumber.Text(16),
		"notAfter", issued.Cert.NotAfter.UTC().Format(time.RFC3339))
	return &pb.IstioCertificateResponse{CertChain: issued.Chain}, nil
}

// refuse logs and counts a refusal and returns the gRPC status for it.
func (s *Server) refuse(log *slog.Logger, code codes.Code, err error) error {
	reason := identity.Reason(err)
	s.metrics.refused.WithLabelValues(reason).Inc()
	log.Warn("certificate request refused", "reason", reason, "err", err)
	return status.Errorf(code, "%s: %v", reason, err)
}
