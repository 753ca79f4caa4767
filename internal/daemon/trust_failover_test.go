package daemon

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/types/known/structpb"

	"crypto/x509"

	"github.com/baremesh/baremesh/core/identity"
	"github.com/baremesh/baremesh/core/testkit"
	"github.com/baremesh/baremesh/internal/daemonconfig"
)

const failoverGroupYAML = `apiVersion: networking.istio.io/v1
kind: WorkloadGroup
metadata: {name: vm, namespace: default}
spec:
  metadata: {labels: {app: vm}}
  template: {ports: {http: 8080}, serviceAccount: vm}
`

// TestTLSProxiesFailOver (issue #32 item 0): three replicas sharing one
// trust domain (fresh state directories, an encrypted cluster), proxies
// with certificates from cp-a on its TLS port, auto-registered; cp-a
// crashes (no leave). Every proxy reconnects over TLS to a survivor (it
// trusts the survivor's server certificate, the survivor trusts its
// client certificate): no registration is lost and the survivors agree
// that they own them all. Before the shared CA no proxy could fail over
// (issue #32: 50 of 50 lost). REPLICA_FAILOVER_PROXIES sets the number
// (default 30).
func TestTLSProxiesFailOver(t *testing.T) {
	proxies := 30
	if s := os.Getenv("REPLICA_FAILOVER_PROXIES"); s != "" {
		proxies, _ = strconv.Atoi(s)
	}
	keyFile := filepath.Join(t.TempDir(), "cluster.key")
	if err := os.WriteFile(keyFile, []byte("MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="), 0o600); err != nil {
		t.Fatal(err)
	}
	conf := t.TempDir()
	if err := os.WriteFile(filepath.Join(conf, "vm.yaml"), []byte(failoverGroupYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	start := func(name string, seeds ...string) (trustReplica, context.CancelFunc) {
		cfg := identityConfig(t)
		cfg.ConfigDirs = []string{conf}
		cfg.Cluster = daemonconfig.ClusterConfig{Name: name, Bind: "127.0.0.1:0", Seeds: seeds, KeyFile: keyFile}
		d, err := New(cfg, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { _ = d.Run(ctx); close(done) }()
		t.Cleanup(func() { cancel(); <-done })
		return trustReplica{Daemon: d, cfg: cfg}, cancel
	}
	a, stopA := start("cp-a")
	b, _ := start("cp-b", a.Cluster().Addr())
	c, _ := start("cp-c", a.Cluster().Addr())
	root, err := os.ReadFile(filepath.Join(a.cfg.StateDir, "ca", identity.RootCertFile))
	if err != nil {
		t.Fatal(err)
	}
	tok, _, err := a.tokens().Create(identity.TokenSpec{Namespace: "default", ServiceAccount: "vm", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(root)

	// Each proxy: a certificate from cp-a, then an ADS stream over TLS to
	// cp-a that moves on to cp-b, cp-c, cp-b, ... whenever it ends.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	targets := []trustReplica{a, b, c}
	// At most 20 certificates (the CA limits requests per peer, and every
	// proxy here is 127.0.0.1): proxies of one service account share them.
	var certs []tls.Certificate
	for i := range min(proxies, 20) {
		resp, key, err := csrCall(t, a, root, "spiffe://cluster.local/ns/default/sa/vm", tok, nil)
		if err != nil {
			t.Fatalf("certificate %d: %v", i, err)
		}
		var chain [][]byte
		for _, p := range resp.GetCertChain() {
			chain = append(chain, pemBlock(t, p))
		}
		certs = append(certs, tls.Certificate{Certificate: chain, PrivateKey: key})
	}
	for i := range proxies {
		cert := certs[i%len(certs)]
		ip := fmt.Sprintf("10.9.%d.%d", i/200, i%200+1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ctx.Err() == nil; n++ {
				to := targets[0]
				if n > 0 {
					to = targets[1+(n+i)%2]
				}
				_ = tlsStream(ctx, to, roots, cert, ip)
			}
		}()
	}
	ownedBy := func(r trustReplica, owners ...string) int {
		n := 0
		for _, rec := range r.Cluster().Records() {
			for _, o := range owners {
				if rec.Owner == o && rec.Connected() {
					n++
				}
			}
		}
		return n
	}
	// What each replica holds, for a failure message.
	holds := func() string {
		var out string
		for _, r := range targets {
			byOwner := map[string]int{}
			for _, rec := range r.Cluster().Records() {
				byOwner[fmt.Sprintf("%s connected=%v", rec.Owner, rec.Connected())]++
			}
			out += fmt.Sprintf(" %s: %v;", r.Cluster().Name(), byOwner)
		}
		return out
	}
	for _, r := range targets {
		deadline := time.Now().Add(30 * time.Second)
		for ownedBy(r, "cp-a") != proxies {
			if time.Now().After(deadline) {
				t.Fatalf("timed out after 30s waiting for %s to hold every registration, owned by cp-a; held:%s", r.Cluster().Name(), holds())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	if err := a.Cluster().Shutdown(false); err != nil { // no leave: a crash
		t.Fatal(err)
	}
	stopA() // ends its streams; the proxies move on
	killed := time.Now()
	var lost int
	var claimed time.Duration // every proxy back and claimed where it landed
	testkit.EventuallyWithin(t, 60*time.Second, "every registration owned by a survivor, on both", func() bool {
		if claimed == 0 && ownedBy(b, "cp-b")+ownedBy(c, "cp-c") == proxies {
			claimed = time.Since(killed)
		}
		return ownedBy(b, "cp-b", "cp-c") == proxies && ownedBy(c, "cp-b", "cp-c") == proxies
	})
	reowned := time.Since(killed)
	for _, r := range []trustReplica{b, c} {
		lost = max(lost, proxies-len(r.Cluster().Records()))
	}
	t.Logf("crash of cp-a holding %d proxies on the TLS port: %d registrations lost; every proxy back and claimed %v after, every registration owned by a survivor on both %v after",
		proxies, lost, claimed.Round(time.Millisecond), reowned.Round(time.Millisecond))
	if lost != 0 {
		t.Errorf("%d registrations lost", lost)
	}
}

// tlsStream runs one proxy's ADS stream to r's TLS port with its client
// certificate until it ends.
func tlsStream(ctx context.Context, r trustReplica, roots *x509.CertPool, cert tls.Certificate, ip string) error {
	conn, err := grpc.NewClient(r.TLSAddr(), grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
		RootCAs: roots, ServerName: "istiod.istio-system.svc", Certificates: []tls.Certificate{cert}})))
	if err != nil {
		return err
	}
	defer conn.Close()
	s, err := discovery.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	if err != nil {
		return err
	}
	md, _ := structpb.NewStruct(map[string]any{"AUTO_REGISTER_GROUP": "vm", "GENERATOR": "grpc"})
	node := &corev3.Node{Id: "sidecar~" + ip + "~vm.default~default.svc.cluster.local", Metadata: md}
	if err := s.Send(&discovery.DiscoveryRequest{Node: node, TypeUrl: "type.googleapis.com/envoy.config.listener.v3.Listener"}); err != nil {
		return err
	}
	for {
		if _, err := s.Recv(); err != nil {
			return err
		}
	}
}
