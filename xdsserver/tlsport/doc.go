// Package tlsport is baremeshd's TLS port (:15012, as istiod's), the
// transport that the CA service (xdsserver/ca) and authenticated ADS
// share: the listener's TLS configuration with its serving certificate
// re-issued from the mesh CA (tls.go), gRPC transport credentials that
// batch TLS records (conn.go), the per-peer limits of the port (failed
// authentications throttle a peer, the CSR rate; limits.go), and the
// proof of identity a call on it presents (CredentialsFromContext,
// creds.go). What a caller may do once identified is not its concern.
//
// It imports core only (core/identity), never sources or other xdsserver
// packages.
package tlsport
