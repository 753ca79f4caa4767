// Package identity owns workload identity: SPIFFE IDs, the certificate
// authority (a self-signed root kept in a state directory, or Istio's
// plugged-in cacerts layout), CSR checks, join tokens (made by baremeshctl,
// checked by baremeshd) and the Authenticator interface with its join-token
// and client-certificate implementations.
//
// It does no networking and knows nothing of gRPC: callers hand an
// Authenticator the Credentials they took from a connection. It must not
// import anything of ours outside core.
package identity
