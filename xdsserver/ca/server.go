// Package ca serves Istio's certificate service
// (istio.v1.auth.IstioCertificateService, CreateCertificate) on baremeshd's
// TLS port: it authenticates the caller (join token or client certificate,
// through an identity.Authenticator), checks that the CSR asks for the
// caller's own identity, signs it with the mesh CA and returns the chain as
// istiod does (leaf, intermediates..., root last). It keeps the
// /debug/certz record. The port itself (TLS configuration, transport,
// per-peer limits, the credentials a call presents) is xdsserver/tlsport's.
//
// It imports core (core/identity) and xdsserver/tlsport only, never
// sources or other xdsserver packages.
package ca

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	pb "istio.io/api/security/v1alpha1"

	"github.com/baremesh/baremesh/core/identity"
	"github.com/baremesh/baremesh/xdsserver/tlsport"
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
	// PreAuthenticator checks the caller before its request is read
	// (it must not spend a join token: identity.TokenAuthenticator with
	// NoSpend); nil reads first. An unauthenticated caller so costs the
	// port no message buffer, however large the message it announces.
	PreAuthenticator identity.Authenticator
	// Peers keeps per-peer limits (failed authentications, CSR rate),
	// shared with the xDS server on the same port; nil makes one with
	// the default Limits.
	Peers *tlsport.Peers
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
	if opts.Peers == nil {
		opts.Peers = tlsport.NewPeers(tlsport.Limits{}, opts.Logger, opts.Registerer)
	}
	return &Server{opts: opts, log: opts.Logger, metrics: newMetrics(opts.Registerer), certz: newCertz(opts.CertzSize)}
}

// Register adds the service to a gRPC server (the TLS one: a bearer token
// must not travel in plaintext). CreateCertificate is registered as a
// stream handler, which gRPC calls before it reads the request (a unary
// handler gets the request read, up to the server's message limit,
// before it runs): the caller is checked first (create). On the wire it
// is the same unary call.
func (s *Server) Register(g *grpc.Server) {
	desc := pb.IstioCertificateService_ServiceDesc
	desc.Methods = nil
	desc.Streams = []grpc.StreamDesc{{StreamName: "CreateCertificate", Handler: func(_ any, st grpc.ServerStream) error { return s.create(st) }}}
	g.RegisterService(&desc, s)
}

// create serves one CreateCertificate call: a throttled peer, a caller
// PreAuthenticator refuses and a peer over its CSR rate are refused
// before the request is read; then CreateCertificate.
func (s *Server) create(st grpc.ServerStream) error {
	ctx := st.Context()
	creds := tlsport.CredentialsFromContext(ctx)
	log := s.log.With("peer", creds.Peer)
	if until, ok := s.opts.Peers.Throttled(creds.Peer); ok {
		return s.refuseReason(log, codes.ResourceExhausted, "throttled",
			fmt.Errorf("peer throttled until %s after repeated failed authentications", until.UTC().Format(time.RFC3339)))
	}
	if s.opts.PreAuthenticator != nil {
		caller, err := s.opts.PreAuthenticator.Authenticate(ctx, creds)
		if err != nil {
			return s.authFailed(log, creds, err)
		}
		if caller.Method != identity.MethodToken {
			// Nothing to spend: CreateCertificate takes this caller
			// rather than reviewing a Kubernetes token twice.
			ctx = context.WithValue(ctx, preAuthenticated{}, caller)
		}
	}
	if !s.opts.Peers.AllowCSR(creds.Peer) {
		return s.refuseReason(log, codes.ResourceExhausted, "rate_limited", errors.New("too many certificate requests from this peer; retry later"))
	}
	req := &pb.IstioCertificateRequest{}
	if err := st.RecvMsg(req); err != nil {
		return err
	}
	resp, err := s.CreateCertificate(ctx, req)
	if err != nil {
		return err
	}
	return st.SendMsg(resp)
}

// preAuthenticated is the context key of the caller create checked, when
// its authentication spends nothing (a certificate, a Kubernetes token).
type preAuthenticated struct{}

// authFailed refuses a caller that failed authentication and counts the
// failure against its peer (not when the failure was ours: Unavailable).
func (s *Server) authFailed(log *slog.Logger, creds identity.Credentials, err error) error {
	code := codes.Unauthenticated
	if identity.Retryable(err) {
		code = codes.Unavailable
	} else {
		s.opts.Peers.Failed(creds.Peer, identity.Reason(err))
	}
	return s.refuse(log, code, fmt.Errorf("authentication failed: %w", err))
}

// CreateCertificate implements IstioCertificateServiceServer. The CSR is
// checked before the caller is authenticated, so a malformed request never
// spends a join token's use.
func (s *Server) CreateCertificate(ctx context.Context, req *pb.IstioCertificateRequest) (*pb.IstioCertificateResponse, error) {
	creds := tlsport.CredentialsFromContext(ctx)
	log := s.log.With("peer", creds.Peer)
	csr, want, err := identity.ParseCSR([]byte(req.GetCsr()))
	if err != nil {
		return nil, s.refuse(log, codes.InvalidArgument, err)
	}
	caller, ok := ctx.Value(preAuthenticated{}).(*identity.Caller)
	if !ok {
		if caller, err = s.opts.Authenticator.Authenticate(ctx, creds); err != nil {
			return nil, s.authFailed(log, creds, err)
		}
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
		Root: identity.Fingerprint(issued.Root), Bundle: fingerprints(issued.Bundle),
	})
	log.Info("certificate issued", "identity", want.String(), "serial", issued.Cert.SerialNumber.Text(16),
		"notAfter", issued.Cert.NotAfter.UTC().Format(time.RFC3339))
	return &pb.IstioCertificateResponse{CertChain: issued.Chain}, nil
}

func fingerprints(cs []*x509.Certificate) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = identity.Fingerprint(c)
	}
	return out
}

// refuse logs and counts a refusal and returns the gRPC status for it.
func (s *Server) refuse(log *slog.Logger, code codes.Code, err error) error {
	return s.refuseReason(log, code, identity.Reason(err), err)
}

// refuseReason is refuse with a reason of its own.
func (s *Server) refuseReason(log *slog.Logger, code codes.Code, reason string, err error) error {
	s.metrics.refused.WithLabelValues(reason).Inc()
	log.Warn("certificate request refused", "reason", reason, "err", err)
	return status.Errorf(code, "%s: %v", reason, err)
}
