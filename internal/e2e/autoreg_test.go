package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/xds"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/baremesh/baremesh/core/identity"
	"github.com/baremesh/baremesh/core/testkit"
	"github.com/baremesh/baremesh/core/workloads"
	"github.com/baremesh/baremesh/internal/daemonconfig"
)

// vmFiles is echo.mesh selecting app=echo, one hand-written entry
// (static), and the WorkloadGroup vm (service account vm-sa) whose
// template points at the vm backend's port.
func vmFiles(static, vm *backend) map[string]string {
	return map[string]string{"mesh.yaml": fmt.Sprintf(`apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: echo, namespace: default}
spec:
  hosts: [echo.mesh]
  ports: [{number: 7070, name: grpc, protocol: GRPC}]
  resolution: STATIC
  workloadSelector: {labels: {app: echo}}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: static, namespace: default}
spec: {address: 127.0.0.1, ports: {grpc: %d}, labels: {app: echo}}
---
apiVersion: networking.istio.io/v1
kind: WorkloadGroup
metadata: {name: vm, namespace: default}
spec:
  metadata: {labels: {app: echo}}
  template: {ports: {grpc: %d}, serviceAccount: vm-sa}
  probe: {tcpSocket: {port: %d}}
`, static.port, vm.port, vm.port)}
}

// certFiles signs a workload certificate for ns/sa with the daemon's CA
// (read from its state directory) and writes cert, key and root files.
func certFiles(t testing.TB, stateDir, ns, sa string) (certFile, keyFile, rootFile string) {
	t.Helper()
	ca, err := identity.LoadCA(identity.CAOptions{Dir: filepath.Join(stateDir, "ca")})
	if err != nil {
		t.Fatal(err)
	}
	iss, signer, err := ca.IssueWorkload(identity.ID{TrustDomain: "cluster.local", Namespace: ns, ServiceAccount: sa}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	key := signer.(*ecdsa.PrivateKey)
	dir := t.TempDir()
	keyDER, _ := x509.MarshalECPrivateKey(key)
	certFile, keyFile, rootFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"), filepath.Join(dir, "root.pem")
	chain := iss.Chain[:len(iss.Chain)-1]
	for f, data := range map[string][]byte{
		certFile: []byte(strings.Join(chain, "")),
		keyFile:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		rootFile: ca.RootPEM(),
	} {
		if err := os.WriteFile(f, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return certFile, keyFile, rootFile
}

func startIdentityMesh(t testing.TB, files map[string]string) (*mesh, string) {
	stateDir := t.TempDir()
	m := startMeshWith(t, files, func(c *daemonconfig.Config) {
		c.TLSAddr, c.StateDir, c.TLSSANs = "127.0.0.1:0", stateDir, []string{"127.0.0.1"}
		c.RegistrationGrace = daemonconfig.Duration{Duration: time.Second}
	})
	return m, stateDir
}

// adsStream is a raw ADS stream over the TLS port (the way Istio's agent
// sends its health reports), optionally with a client certificate or a
// bearer token.
type adsStream struct {
	stream discovery.AggregatedDiscoveryService_StreamAggregatedResourcesClient
	node   *corev3.Node
	cancel context.CancelFunc
}

func openADS(t *testing.T, m *mesh, rootFile, certFile, keyFile, token, nodeID, group string) (*adsStream, error) {
	t.Helper()
	root, err := os.ReadFile(rootFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(root)
	tc := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}
	if certFile != "" {
		kp, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			t.Fatal(err)
		}
		tc.Certificates = []tls.Certificate{kp}
	}
	cc, err := grpc.NewClient(m.d.TLSAddr(), grpc.WithTransportCredentials(credentials.NewTLS(tc)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	}
	s, err := discovery.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(ctx)
	if err != nil {
		return nil, err
	}
	md, _ := structpb.NewStruct(map[string]any{"AUTO_REGISTER_GROUP": group, "GENERATOR": "grpc"})
	a := &adsStream{stream: s, node: &corev3.Node{Id: nodeID, Metadata: md}, cancel: cancel}
	if err := s.Send(&discovery.DiscoveryRequest{Node: a.node, TypeUrl: "type.googleapis.com/envoy.config.listener.v3.Listener", ResourceNames: []string{"echo.mesh:7070"}}); err != nil {
		_, err = s.Recv() // the stream's status
		return nil, err
	}
	if _, err := s.Recv(); err != nil {
		return nil, err
	}
	return a, nil
}

func (a *adsStream) health(t *testing.T, unhealthy string) {
	t.Helper()
	r := &discovery.DiscoveryRequest{TypeUrl: workloads.HealthType}
	if unhealthy != "" {
		r.ErrorDetail = &statuspb.Status{Code: 500, Message: unhealthy}
	}
	if err := a.stream.Send(r); err != nil {
		t.Fatal(err)
	}
}

// TestAuthenticatedXDSOverTLS: xDS on the TLS port, beside the CA.
// A grpc-go xDS client with a certificate from our CA (bootstrap "tls"
// channel creds) gets config and its calls work; a node in another
// namespace than its certificate is refused with PermissionDenied; no
// certificate is Unauthenticated; a join token authenticates without
// being spent.
func TestAuthenticatedXDSOverTLS(t *testing.T) {
	static, vm := startBackend(t, "static"), startBackend(t, "vm")
	m, stateDir := startIdentityMesh(t, vmFiles(static, vm))
	certFile, keyFile, rootFile := certFiles(t, stateDir, "default", "client")

	bootstrap := fmt.Sprintf(`{
  "xds_servers": [{"server_uri": %q, "channel_creds": [{"type": "tls", "config": {"ca_certificate_file": %q, "certificate_file": %q, "private_key_file": %q}}], "server_features": ["xds_v3"]}],
  "node": {"id": "sidecar~127.0.0.1~client-1.default~default.svc.cluster.local", "metadata": {"GENERATOR": "grpc"}}
}`, m.d.TLSAddr(), rootFile, certFile, keyFile)
	res, err := xds.NewXDSResolverWithConfigForTesting([]byte(bootstrap))
	if err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient("xds:///echo.mesh:7070", grpc.WithResolvers(res), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	allTo(t, t.Context(), cc, "static")
	var st syncz
	getJSON(t, "http://"+m.d.HTTPAddr()+"/debug/syncz", &st)
	if !strings.Contains(fmt.Sprint(st), "spiffe://cluster.local/ns/default/sa/client") {
		t.Fatalf("syncz does not show the authenticated identity: %v", st)
	}

	for name, tc := range map[string]struct {
		cert, key, token, node string
		code                   codes.Code
		msg                    string
	}{
		"wrong namespace": {certFile, keyFile, "", "sidecar~127.0.0.1~x.other~other.svc.cluster.local", codes.PermissionDenied, "authenticated as spiffe://cluster.local/ns/default/sa/client"},
		"no certificate":  {"", "", "", "sidecar~127.0.0.1~x.default~default.svc.cluster.local", codes.Unauthenticated, "no credentials"},
		"bad token":       {"", "", "bm1.0000.nope", "sidecar~127.0.0.1~x.default~default.svc.cluster.local", codes.Unauthenticated, "token"},
	} {
		_, err := openADS(t, m, rootFile, tc.cert, tc.key, tc.token, tc.node, "")
		if status.Code(err) != tc.code || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: %v, want %v with %q", name, err, tc.code, tc.msg)
		}
	}

	// A join token (one use) authenticates xDS streams without spending it.
	store := &identity.TokenStore{Dir: filepath.Join(stateDir, "tokens")}
	tok, _, err := store.Create(identity.TokenSpec{Namespace: "default", ServiceAccount: "client", TTL: time.Hour, MaxUses: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if _, err := openADS(t, m, rootFile, "", "", tok, "sidecar~127.0.0.1~tok.default~default.svc.cluster.local", ""); err != nil {
			t.Fatalf("stream %d with a join token: %v", i, err)
		}
	}
	if _, err := store.Check(tok); err != nil {
		t.Fatalf("xDS spent the token: %v", err)
	}
}

type syncz any

// TestAutoRegistration: a grpc-go xDS client over TLS with
// AUTO_REGISTER_GROUP registers a WorkloadEntry; a second grpc-go client's
// traffic reaches the VM; health reports (as Istio's agent sends them)
// take it out of and back into the client's endpoints; after a
// disconnect the entry goes once the grace period is over.
func TestAutoRegistration(t *testing.T) {
	static, vm := startBackend(t, "static"), startBackend(t, "vm")
	m, stateDir := startIdentityMesh(t, vmFiles(static, vm))
	certFile, keyFile, rootFile := certFiles(t, stateDir, "default", "vm-sa")
	client := m.xdsClient(t, "client") // plaintext, loopback
	allTo(t, t.Context(), client, "static")

	bootstrap := fmt.Sprintf(`{
  "xds_servers": [{"server_uri": %q, "channel_creds": [{"type": "tls", "config": {"ca_certificate_file": %q, "certificate_file": %q, "private_key_file": %q}}], "server_features": ["xds_v3"]}],
  "node": {"id": "sidecar~127.0.0.1~vm-1.default~default.svc.cluster.local", "metadata": {"GENERATOR": "grpc", "AUTO_REGISTER_GROUP": "vm", "LABELS": {"version": "v1"}}}
}`, m.d.TLSAddr(), rootFile, certFile, keyFile)
	res, err := xds.NewXDSResolverWithConfigForTesting([]byte(bootstrap))
	if err != nil {
		t.Fatal(err)
	}
	vmClient, err := grpc.NewClient("xds:///echo.mesh:7070", grpc.WithResolvers(res), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	vmClient.Connect()
	seen := func(want string) func() bool {
		return func() bool {
			for i := 0; i < 20; i++ {
				if b, err := call(t.Context(), client); err == nil && b == want {
					return true
				}
			}
			return false
		}
	}
	testkit.EventuallyWithin(t, e2eWait, "client reaches the auto-registered VM", seen("vm"))
	regs := registrations(t, m)
	if len(regs) != 1 || regs[0]["name"] != "vm-127.0.0.1" || regs[0]["connected"] != true {
		t.Fatalf("registrationz: %v", regs)
	}
	vmClient.Close()
	testkit.EventuallyWithin(t, e2eWait, "entry removed after the grace period", func() bool { return len(registrations(t, m)) == 0 })
	allTo(t, t.Context(), client, "static")

	// The agent's way: a stream that reports health.
	agent, err := openADS(t, m, rootFile, certFile, keyFile, "", "sidecar~127.0.0.1~vm-2.default~default.svc.cluster.local", "vm")
	if err != nil {
		t.Fatal(err)
	}
	testkit.EventuallyWithin(t, e2eWait, "client reaches the re-registered VM", seen("vm"))
	dump := func() string {
		_, body := httpGet(t, "http://"+m.d.HTTPAddr()+"/debug/config_dump?proxy="+url.QueryEscape("sidecar~127.0.0.1~client.default~default.svc.cluster.local"))
		return body
	}
	vmPort := fmt.Sprint(vm.port)
	if !strings.Contains(dump(), vmPort) {
		t.Fatalf("the client's config has no endpoint on the VM's port %s", vmPort)
	}
	sent := time.Now()
	agent.health(t, "connection refused")
	testkit.EventuallyWithin(t, e2eWait, "the unhealthy VM out of the client's EDS", func() bool { return !strings.Contains(dump(), vmPort) })
	var acked time.Time
	testkit.EventuallyWithin(t, e2eWait, "the client ACKs the EDS without the VM", func() bool {
		st := typeStatus(m, "client", "eds")
		acked = st.AckedAt
		return st.AckedVer == st.SentVersion && st.AckedAt.After(sent)
	})
	t.Logf("unhealthy report → the client's ACK of the EDS without the VM: %v", acked.Sub(sent).Round(time.Millisecond))
	allTo(t, t.Context(), client, "static")
	if regs := registrations(t, m); regs[0]["health"] != "unhealthy" {
		t.Fatalf("registrationz: %v", regs)
	}
	agent.health(t, "")
	testkit.EventuallyWithin(t, e2eWait, "healthy VM back in the client's endpoints", seen("vm"))
	if code, body := httpGet(t, "http://"+m.d.HTTPAddr()+"/metrics"); code != 200 ||
		!strings.Contains(body, "baremesh_autoregistrations_total 2") || !strings.Contains(body, `baremesh_workload_health_changes_total{healthy="false"} 1`) {
		t.Fatalf("metrics: %d", code)
	}

	// The group's template changes while the VM is connected: the entry
	// follows (labels no longer select echo.mesh), then the group goes.
	files := vmFiles(static, vm)["mesh.yaml"]
	m.write("mesh.yaml", strings.Replace(files, "metadata: {labels: {app: echo}}", "metadata: {labels: {app: other}}", 1))
	allTo(t, t.Context(), client, "static")
	m.write("mesh.yaml", files)
	testkit.EventuallyWithin(t, e2eWait, "the VM back after the template is restored", seen("vm"))
	m.write("mesh.yaml", files[:strings.Index(files, "---\napiVersion: networking.istio.io/v1\nkind: WorkloadGroup")])
	testkit.EventuallyWithin(t, e2eWait, "entries gone with their group", func() bool { return len(registrations(t, m)) == 0 })
	allTo(t, t.Context(), client, "static")
	m.write("mesh.yaml", files)

	// A proxy of another service account may not join the group.
	other, otherKey, _ := certFiles(t, stateDir, "default", "intruder")
	testkit.EventuallyWithin(t, e2eWait, "intruder refused for its service account (once the group is back)", func() bool {
		_, err = openADS(t, m, rootFile, other, otherKey, "", "sidecar~127.0.0.2~x.default~default.svc.cluster.local", "vm")
		return status.Code(err) == codes.PermissionDenied && strings.Contains(err.Error(), "runs as service account vm-sa")
	})
}

func registrations(t *testing.T, m *mesh) []map[string]any {
	var page struct {
		Registrations []map[string]any `json:"registrations"`
	}
	getJSON(t, "http://"+m.d.HTTPAddr()+"/debug/registrationz", &page)
	return page.Registrations
}

// TestAutoRegistrationSurvivesRestart: the entries are persisted under
// stateDir, so the restarted daemon's first snapshot already has the VM
// (a client of the new daemon reaches it before the VM reconnects), and
// a VM that reconnects inside the grace period is never removed; one
// that does not come back is (no stale entries, istio#28743).
func TestAutoRegistrationSurvivesRestart(t *testing.T) {
	static, vm := startBackend(t, "static"), startBackend(t, "vm")
	stateDir := t.TempDir()
	const grace = 3 * time.Second
	configure := func(c *daemonconfig.Config) {
		c.TLSAddr, c.StateDir, c.TLSSANs = "127.0.0.1:0", stateDir, []string{"127.0.0.1"}
		c.RegistrationGrace = daemonconfig.Duration{Duration: grace}
	}
	m1 := startMeshWith(t, vmFiles(static, vm), configure)
	certFile, keyFile, rootFile := certFiles(t, stateDir, "default", "vm-sa")
	if _, err := openADS(t, m1, rootFile, certFile, keyFile, "", "sidecar~127.0.0.1~vm-1.default~default.svc.cluster.local", "vm"); err != nil {
		t.Fatal(err)
	}
	if _, err := openADS(t, m1, rootFile, certFile, keyFile, "", "sidecar~127.0.0.3~vm-3.default~default.svc.cluster.local", "vm"); err != nil {
		t.Fatal(err)
	}
	testkit.EventuallyWithin(t, e2eWait, "two registrations", func() bool { return len(registrations(t, m1)) == 2 })
	m1.stop()

	m2 := startMeshWith(t, vmFiles(static, vm), configure)
	if regs := registrations(t, m2); len(regs) != 2 {
		t.Fatalf("restored registrations: %v", regs)
	}
	client := m2.xdsClient(t, "client")
	testkit.EventuallyWithin(t, e2eWait, "the new daemon's client reaches the VM before it reconnects", func() bool {
		for i := 0; i < 20; i++ {
			if b, err := call(t.Context(), client); err == nil && b == "vm" {
				return true
			}
		}
		return false
	})
	if _, err := openADS(t, m2, rootFile, certFile, keyFile, "", "sidecar~127.0.0.1~vm-1.default~default.svc.cluster.local", "vm"); err != nil {
		t.Fatal(err)
	}
	testkit.EventuallyWithin(t, e2eWait, "the VM that did not come back is removed", func() bool {
		regs := registrations(t, m2)
		return len(regs) == 1 && regs[0]["name"] == "vm-127.0.0.1" && regs[0]["connected"] == true
	})
	time.Sleep(grace) // past the reconnected entry's grace period: what is checked is that it stays
	if regs := registrations(t, m2); len(regs) != 1 || regs[0]["connected"] != true {
		t.Fatalf("reconnected entry: %v", regs)
	}
}

// TestDisconnectDuringPush: VMs whose streams end while pushes are under
// way (config edits in a loop) are all marked and removed after the grace
// period; nothing deadlocks or races (-race).
func TestDisconnectDuringPush(t *testing.T) {
	static, vm := startBackend(t, "static"), startBackend(t, "vm")
	m, stateDir := startIdentityMesh(t, vmFiles(static, vm))
	certFile, keyFile, rootFile := certFiles(t, stateDir, "default", "vm-sa")
	var streams []*adsStream
	for i := 1; i <= 5; i++ {
		a, err := openADS(t, m, rootFile, certFile, keyFile, "", fmt.Sprintf("sidecar~127.0.1.%d~vm-%d.default~default.svc.cluster.local", i, i), "vm")
		if err != nil {
			t.Fatal(err)
		}
		streams = append(streams, a)
	}
	testkit.EventuallyWithin(t, e2eWait, "five registrations", func() bool { return len(registrations(t, m)) == 5 })
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 20; i++ {
			m.write(fmt.Sprintf("extra-%d.yaml", i%3), fmt.Sprintf(`apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: extra-%d, namespace: default}
spec: {hosts: [extra%d.mesh], ports: [{number: 80, name: http, protocol: HTTP}], resolution: STATIC, endpoints: [{address: 10.9.0.%d}]}
`, i%3, i%3, i))
		}
	}()
	for _, a := range streams {
		_ = a.stream.CloseSend()
		a.cancel()
	}
	<-done
	testkit.EventuallyWithin(t, e2eWait, "every entry removed after the grace period", func() bool { return len(registrations(t, m)) == 0 })
}
