// Package e2e holds end-to-end tests: a real baremeshd (internal/daemon)
// over a config directory, and real xDS peers (grpc-go's xDS client and
// server, gRPC C-core through python3-grpcio) talking to it.
package e2e
