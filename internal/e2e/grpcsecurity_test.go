package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	xdscreds "google.golang.org/grpc/credentials/xds"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/xds"

	"github.com/baremesh/baremesh/core/identity"
	"github.com/baremesh/baremesh/core/testkit"
)

// secMesh is a mesh with a CA (core/identity) and a grpc-go xDS server
// "echo" (namespace default, labels app=echo, identity sa/echo) serving
// grpc.testing.TestService with xDS server credentials; its handlers
// return the client's certificate URI in the "peer-id" header.
type secMesh struct {
	*mesh
	ca      *identity.CA
	certDir string
	port    int
	addr    string
	nodeID  string
}

const echoHost = "echo.default.svc.cluster.local"

func startSecMesh(t *testing.T, files map[string]string) *secMesh {
	t.Helper()
	s := &secMesh{mesh: startMesh(t, files), certDir: t.TempDir(), nodeID: "echo-server"}
	ca, err := identity.LoadCA(identity.CAOptions{Dir: t.TempDir(), Organization: "cluster.local"})
	if err != nil {
		t.Fatal(err)
	}
	s.ca = ca
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.addr, s.port = lis.Addr().String(), lis.Addr().(*net.TCPAddr).Port
	// The service and its mTLS DestinationRule, before the server asks
	// for its listener.
	s.write("echo.yaml", fmt.Sprintf(`apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: echo, namespace: default}
spec:
  hosts: [%s]
  location: MESH_INTERNAL
  ports: [{number: %d, name: grpc, protocol: GRPC}]
  resolution: STATIC
  endpoints: [{address: 127.0.0.1, serviceAccount: echo, labels: {app: echo}}]
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: echo, namespace: default}
spec:
  host: %s
  trafficPolicy: {tls: {mode: ISTIO_MUTUAL}}
`, echoHost, s.port, echoHost))
	creds, err := xdscreds.NewServerCredentials(xdscreds.ServerOptions{FallbackCreds: insecure.NewCredentials()})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var mode connectivity.ServingMode
	srv, err := xds.NewGRPCServer(grpc.Creds(creds),
		xds.BootstrapContentsForTesting(s.bootstrapFor(t, s.nodeID, "default", map[string]string{"app": "echo"}, "default", "echo")),
		xds.ServingModeCallback(func(_ net.Addr, a xds.ServingModeChangeArgs) {
			mu.Lock()
			mode = a.Mode
			mu.Unlock()
		}))
	if err != nil {
		t.Fatal(err)
	}
	testgrpc.RegisterTestServiceServer(srv, echoServer{})
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	testkit.EventuallyWithin(t, e2eWait, "xDS server SERVING", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return mode == connectivity.ServingModeServing
	})
	return s
}

type echoServer struct {
	testgrpc.UnimplementedTestServiceServer
}

func (echoServer) EmptyCall(ctx context.Context, _ *testgrpc.Empty) (*testgrpc.Empty, error) {
	return &testgrpc.Empty{}, sendPeer(ctx)
}

func (echoServer) UnaryCall(ctx context.Context, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	return &testgrpc.SimpleResponse{}, sendPeer(ctx)
}

// sendPeer checks the connection on the server side: the client's
// certificate URI (empty over plaintext) goes back in "peer-id".
func sendPeer(ctx context.Context) error {
	id := ""
	if p, ok := peer.FromContext(ctx); ok {
		if info, ok := p.AuthInfo.(credentials.TLSInfo); ok {
			if cs := info.State.PeerCertificates; len(cs) > 0 && len(cs[0].URIs) > 0 {
				id = cs[0].URIs[0].String()
			}
		}
	}
	return grpc.SetHeader(ctx, metadata.Pairs("peer-id", id))
}

// issue writes a workload certificate for spiffe://cluster.local/ns/NS/sa/SA,
// signed by the mesh CA, as a file_watcher certificate provider reads it.
func (s *secMesh) issue(t *testing.T, ns, sa string) (cert, key, root string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	iss, err := s.ca.SignWorkload(&x509.CertificateRequest{PublicKey: k.Public()},
		identity.ID{TrustDomain: "cluster.local", Namespace: ns, ServiceAccount: sa}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(s.certDir, ns+"-"+sa)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	cert, key, root = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"), filepath.Join(dir, "root.pem")
	for name, data := range map[string][]byte{
		cert: []byte(strings.Join(iss.Chain[:len(iss.Chain)-1], "")),
		key:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}),
		root: s.ca.RootPEM(),
	} {
		if err := os.WriteFile(name, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return cert, key, root
}

// bootstrapFor is a proxyless bootstrap with Istio's certificate provider
// instance "default" (file_watcher) holding a certificate for idNS/idSA;
// the node is in namespace ns with labels.
func (s *secMesh) bootstrapFor(t *testing.T, nodeID, ns string, labels map[string]string, idNS, idSA string) []byte {
	t.Helper()
	cert, key, root := s.issue(t, idNS, idSA)
	b, err := json.Marshal(map[string]any{
		"xds_servers":                            []any{map[string]any{"server_uri": s.d.XDSAddr(), "channel_creds": []any{map[string]any{"type": "insecure"}}, "server_features": []string{"xds_v3"}}},
		"node":                                   map[string]any{"id": nodeID, "metadata": map[string]any{"GENERATOR": "grpc", "NAMESPACE": ns, "LABELS": labels}},
		"server_listener_resource_name_template": "grpc/server?xds.resource.listening_address=%s",
		"certificate_providers": map[string]any{"default": map[string]any{"plugin_name": "file_watcher", "config": map[string]any{
			"certificate_file": cert, "private_key_file": key, "ca_certificate_file": root, "refresh_interval": "600s"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// client is a grpc-go xDS client of the echo service with xDS client
// credentials and a certificate for ns/sa.
func (s *secMesh) client(t *testing.T, ns, sa string) testgrpc.TestServiceClient {
	t.Helper()
	res, err := xds.NewXDSResolverWithConfigForTesting(s.bootstrapFor(t, "client-"+ns+"-"+sa, "default", nil, ns, sa))
	if err != nil {
		t.Fatal(err)
	}
	creds, err := xdscreds.NewClientCredentials(xdscreds.ClientOptions{FallbackCreds: insecure.NewCredentials()})
	if err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient(fmt.Sprintf("xds:///%s:%d", echoHost, s.port), grpc.WithResolvers(res), grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return testgrpc.NewTestServiceClient(cc)
}

// rpc makes one RPC ("empty" or "unary") and returns the peer-id the
// server saw and the status code.
func rpc(c testgrpc.TestServiceClient, method string, md ...string) (string, codes.Code) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if len(md) > 0 {
		ctx = metadata.AppendToOutgoingContext(ctx, md...)
	}
	var hdr metadata.MD
	var err error
	if method == "unary" {
		_, err = c.UnaryCall(ctx, &testgrpc.SimpleRequest{}, grpc.Header(&hdr))
	} else {
		_, err = c.EmptyCall(ctx, &testgrpc.Empty{}, grpc.Header(&hdr))
	}
	return strings.Join(hdr.Get("peer-id"), ","), status.Code(err)
}

// ldsAcks is how many LDS responses the echo server has ACKed.
func (s *secMesh) ldsAcks() int {
	n := 0
	for _, p := range s.d.XDS().Syncz() {
		if p.ID != s.nodeID {
			continue
		}
		for _, ty := range p.Types {
			if ty.Type == "lds" {
				n += ty.Acks
			}
		}
	}
	return n
}

// apply writes a policy file and waits until the echo server has ACKed
// a listener update after it (each file carries a distinct sentinel,
// so the listener always changes).
func (s *secMesh) apply(t *testing.T, name, body string) {
	t.Helper()
	before := s.ldsAcks()
	s.write(name, body)
	testkit.EventuallyWithin(t, e2eWait, "echo server ACKs the listener with "+name, func() bool { return s.ldsAcks() > before })
}
