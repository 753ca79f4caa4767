package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// BenchmarkXDSHandshake is one new connection: dial, ADS stream, LDS
// request, first response — plaintext on xdsAddr versus TLS with a client
// certificate from the daemon's CA on tlsAddr (handshake, certificate
// verification, authentication).
func BenchmarkXDSHandshake(b *testing.B) {
	static, vm := startBackend(b, "static"), startBackend(b, "vm")
	m, stateDir := startIdentityMesh(b, vmFiles(static, vm))
	certFile, keyFile, rootFile := certFiles(b, stateDir, "default", "client")
	root, _ := os.ReadFile(rootFile)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(root)
	kp, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		b.Fatal(err)
	}
	tlsCreds := credentials.NewTLS(&tls.Config{RootCAs: pool, ServerName: "127.0.0.1", Certificates: []tls.Certificate{kp}})
	run := func(b *testing.B, addr string, creds credentials.TransportCredentials) {
		node := &corev3.Node{Id: "sidecar~127.0.0.1~bench.default~default.svc.cluster.local"}
		for i := 0; i < b.N; i++ {
			cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			s, err := discovery.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(ctx)
			if err == nil {
				err = s.Send(&discovery.DiscoveryRequest{Node: node, TypeUrl: "type.googleapis.com/envoy.config.listener.v3.Listener", ResourceNames: []string{"echo.mesh:7070"}})
			}
			if err == nil {
				_, err = s.Recv()
			}
			cancel()
			cc.Close()
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("plaintext", func(b *testing.B) { run(b, m.d.XDSAddr(), insecure.NewCredentials()) })
	b.Run("tls-client-cert", func(b *testing.B) { run(b, m.d.TLSAddr(), tlsCreds) })
}
