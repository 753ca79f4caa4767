package onboard

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	pb "istio.io/api/security/v1alpha1"

	"github.com/baremesh/baremesh/internal/daemon"
	"github.com/baremesh/baremesh/internal/daemonconfig"
	"github.com/baremesh/baremesh/xdsserver/ca"
)

const groupYAML = `apiVersion: networking.istio.io/v1
kind: WorkloadGroup
metadata: {name: reviews, namespace: bookinfo}
spec:
  metadata:
    labels: {app: reviews, version: v3}
  template:
    serviceAccount: reviews
    ports: {http: 9080}
`

// istioBins returns the folder with Istio's pilot-agent, built by
// ../shared/tools/istio-bins (ISTIO_BINS overrides), or skips the test.
func istioBins(t *testing.T) string {
	t.Helper()
	if d := os.Getenv("ISTIO_BINS"); d != "" {
		return d
	}
	script, _ := filepath.Abs("../../../shared/tools/istio-bins")
	if _, err := os.Stat(script); err != nil {
		t.Skipf("Istio's pilot-agent is unavailable: %s not found (set ISTIO_BINS to a folder holding pilot-agent)", script)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, script).Output()
	if err != nil {
		t.Skipf("Istio's pilot-agent is unavailable: %s: %v", script, err)
	}
	return strings.TrimSpace(string(out))
}

// testSetup writes a config dir with the WorkloadGroup, a baremesh.yaml for
// baremeshctl, and starts a real daemon on free ports with the TLS port on.
func testSetup(t *testing.T, extraConfig string) (cfgFile string, d *daemon.Daemon) {
	t.Helper()
	return testSetupAt(t, "127.0.0.1", extraConfig)
}

// testSetupAt is testSetup with the TLS port on tlsHost (an address a
// VM in a network namespace can reach).
func testSetupAt(t *testing.T, tlsHost, extraConfig string) (cfgFile string, d *daemon.Daemon) {
	t.Helper()
	dir := t.TempDir()
	conf := filepath.Join(dir, "conf.d")
	if err := os.MkdirAll(conf, 0o755); err != nil {
		t.Fatal(err)
	}
	must(t, os.WriteFile(filepath.Join(conf, "wg.yaml"), []byte(groupYAML), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "meshconfig.yaml"), []byte("trustDomain: cluster.local\n"), 0o644))
	cfgFile = filepath.Join(dir, "baremesh.yaml")
	must(t, os.WriteFile(cfgFile, []byte("configDirs: [conf.d]\nmeshConfig: meshconfig.yaml\nstateDir: state\n"+
		"xdsAddr: 127.0.0.1:0\nhttpAddr: 127.0.0.1:0\ntlsAddr: "+net.JoinHostPort(tlsHost, "0")+"\n"+extraConfig), 0o644))
	cfg, err := daemonconfig.ReadFile(cfgFile)
	if err != nil {
		t.Fatal(err)
	}
	d, err = daemon.New(cfg, slog.New(slog.NewTextHandler(testWriter{t}, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("daemon did not stop")
		}
	})
	return cfgFile, d
}

// TestPilotAgentOnboarding runs Istio's own agent as Istio runs it for
// proxyless gRPC on a VM (DISABLE_ENVOY, PROV_CERT = OUTPUT_CERTS, the
// cluster.env variables, the token file) against baremeshd's CA: the first
// certificate is bought with the join token of `baremeshctl vm bootstrap`,
// renewed, and after the token has expired and the agent restarted, the
// agent renews with its own certificate.
func TestPilotAgentOnboarding(t *testing.T) {
	bins := istioBins(t)
	cfgFile, d := testSetup(t, "")
	// Generous enough for a loaded machine: the first certificate must come
	// within the token's lifetime, the restart within the last certificate's.
	const tokenTTL = 15 * time.Second
	boot, vm, certs, env := prepareVM(t, d, cfgFile, tokenTTL)
	tokenIssued := time.Now()
	certz, waitIssued := certzOf(t, d)

	agent := startAgent(t, bins, vm, env)
	first := waitIssued(1, "the first certificate", 30*time.Second)
	if first.Method != "token" || first.Identity != "spiffe://cluster.local/ns/bookinfo/sa/reviews" || first.Group != "reviews" {
		t.Fatalf("first certificate: %+v", first)
	}
	leaf := checkOutput(t, certs, first.Serial)
	t.Logf("pilot-agent got %s (serial %s, via %s, valid until %s)", leaf.URIs[0], first.Serial, first.Method, leaf.NotAfter.Format(time.RFC3339))

	renewed := waitIssued(2, "the agent's renewal", 60*time.Second)
	checkOutput(t, certs, renewed.Serial)
	t.Logf("renewed: serial %s via %s after %v (token expired %v ago)", renewed.Serial, renewed.Method,
		renewed.Issued.Sub(first.Issued).Round(time.Second), time.Since(tokenIssued.Add(tokenTTL)).Round(time.Second))
	agent.stop()

	// Restart with the token expired: the agent presents the certificate it
	// wrote, and that alone is its identity.
	if d := time.Until(tokenIssued.Add(tokenTTL)); d > 0 {
		time.Sleep(d + 100*time.Millisecond) // wait out the token's lifetime; nothing to poll for
	}
	n := len(certz())
	agent = startAgent(t, bins, vm, env)
	again := waitIssued(n+1, "the certificate after restart", 30*time.Second)
	if again.Method != "client-cert" || again.Identity != first.Identity {
		t.Fatalf("after restart with the token expired: %+v", again)
	}
	checkOutput(t, certs, again.Serial)
	t.Logf("after restart, token expired: serial %s via %s (presented certificate %s)", again.Serial, again.Method, again.With)
	agent.stop()

	// The token is refused on its own, with its reason.
	tok, _ := os.ReadFile(filepath.Join(boot, "istio-token"))
	conn, err := grpc.NewClient(d.TLSAddr(), grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
		RootCAs: rootPool(t, filepath.Join(boot, "root-cert.pem")), ServerName: "istiod.istio-system.svc"})))
	must(t, err)
	defer conn.Close()
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+string(tok))
	_, err = pb.NewIstioCertificateServiceClient(conn).CreateCertificate(ctx, &pb.IstioCertificateRequest{Csr: wellFormedCSR(t)})
	if st := status.Convert(err); st.Code() != codes.Unauthenticated || !strings.HasPrefix(st.Message(), "token_expired:") {
		t.Fatalf("expired token alone: %v", err)
	}
}

// prepareVM runs `baremeshctl vm bootstrap` and lays its files out as Istio's
// VM package does, under the agent's working directory. It returns the
// bootstrap folder, that directory, PROV_CERT (= OUTPUT_CERTS) and the
// agent's environment (cluster.env and the proxyless settings).
func prepareVM(t *testing.T, d *daemon.Daemon, cfgFile string, tokenTTL time.Duration) (boot, vm, certs string, env map[string]string) {
	t.Helper()
	host, port, _ := net.SplitHostPort(d.TLSAddr())

	boot = filepath.Join(t.TempDir(), "vm")
	var out, errOut bytes.Buffer
	if rc := Main([]string{"vm", "bootstrap", "--config", cfgFile, "--namespace", "bookinfo", "--group", "reviews",
		"--out", boot, "--address", d.TLSAddr(), "--ttl", tokenTTL.String()}, &out, &errOut); rc != 0 {
		t.Fatalf("vm bootstrap: %d: %s", rc, errOut.String())
	}
	hosts, _ := os.ReadFile(filepath.Join(boot, "hosts"))
	if string(hosts) != host+" istiod.istio-system.svc\n" {
		t.Fatalf("hosts: %q", hosts)
	}

	// The VM package's layout, under the agent's working directory.
	vm = t.TempDir()
	certs = filepath.Join(vm, "etc", "certs")
	for _, c := range []struct{ from, to string }{
		{"mesh.yaml", "etc/istio/config/mesh"},
		{"istio-token", "var/run/secrets/tokens/istio-token"},
		{"root-cert.pem", "etc/certs/root-cert.pem"},
	} {
		data, err := os.ReadFile(filepath.Join(boot, c.from))
		must(t, err)
		must(t, os.MkdirAll(filepath.Dir(filepath.Join(vm, c.to)), 0o755))
		must(t, os.WriteFile(filepath.Join(vm, c.to), data, 0o600))
	}
	env = clusterEnv(t, filepath.Join(boot, "cluster.env"))
	if env["CA_ADDR"] != "istiod.istio-system.svc:"+port {
		t.Fatalf("cluster.env CA_ADDR = %q", env["CA_ADDR"])
	}
	// The hosts file would map istiod.istio-system.svc to 127.0.0.1; the
	// test does not edit /etc/hosts, so it dials "localhost", for which
	// the agent checks the server certificate for istiod.istio-system.svc
	// all the same (istio's pilot/pkg/grpc/tls.go).
	env["CA_ADDR"] = "localhost:" + port
	env["DISABLE_ENVOY"] = "true"
	env["PROV_CERT"], env["OUTPUT_CERTS"] = certs, certs
	env["SECRET_TTL"] = "40s"               // renewal at about half of it
	env["ISTIO_META_DNS_CAPTURE"] = "false" // no DNS proxy on a shared port
	env["PROXY_CONFIG"] = fmt.Sprintf(`{"statusPort": %d}`, freePort(t))
	return boot, vm, certs, env
}

// certzOf reads baremeshd's /debug/certz; wait polls it until n
// certificates were issued and returns the newest.
func certzOf(t *testing.T, d *daemon.Daemon) (certz func() []ca.Record, wait func(n int, what string, within time.Duration) ca.Record) {
	certz = func() []ca.Record {
		resp, err := http.Get("http://" + d.HTTPAddr() + "/debug/certz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var v struct{ Issued []ca.Record }
		must(t, json.NewDecoder(resp.Body).Decode(&v))
		return v.Issued
	}
	wait = func(n int, what string, within time.Duration) ca.Record {
		t.Helper()
		deadline := time.Now().Add(within)
		for {
			if c := certz(); len(c) >= n {
				return c[0]
			}
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s (certificate #%d)", what, n)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return certz, wait
}

// TestPilotAgentPluggedCA: with Istio's cacerts layout (a root and an
// intermediate that signs), the agent accepts the chain baremeshd returns
// (leaf, intermediate, root) and writes it out whole.
func TestPilotAgentPluggedCA(t *testing.T) {
	bins := istioBins(t)
	cacerts, root, inter := pluggedCACerts(t)
	cfgFile, d := testSetup(t, "caCertsDir: "+cacerts+"\n")
	_, vm, certs, env := prepareVM(t, d, cfgFile, time.Minute)
	if got, _ := os.ReadFile(filepath.Join(certs, "root-cert.pem")); !bytes.Equal(got, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: root.Raw})) {
		t.Fatal("vm bootstrap's root-cert.pem is not the plugged root")
	}
	_, waitIssued := certzOf(t, d)
	agent := startAgent(t, bins, vm, env)
	first := waitIssued(1, "the first certificate", 30*time.Second)
	checkOutput(t, certs, first.Serial)
	agent.stop()
	data, _ := os.ReadFile(filepath.Join(certs, "cert-chain.pem"))
	var chain []*x509.Certificate
	for b, rest := pem.Decode(data); b != nil; b, rest = pem.Decode(rest) {
		c, err := x509.ParseCertificate(b.Bytes)
		must(t, err)
		chain = append(chain, c)
	}
	if len(chain) != 3 || !chain[1].Equal(inter) || !chain[2].Equal(root) {
		t.Fatalf("agent's cert-chain.pem: %d certificates, want leaf, intermediate, root", len(chain))
	}
	t.Logf("plugged CA: agent holds %s signed by %q under %q", chain[0].URIs[0], chain[1].Subject.CommonName, chain[2].Subject.CommonName)
}

// pluggedCACerts writes Istio's cacerts layout: root, an intermediate
// signing CA, cert-chain.pem = intermediate + root.
func pluggedCACerts(t *testing.T) (dir string, root, inter *x509.Certificate) {
	dir = t.TempDir()
	mk := func(name string, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey) {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		must(t, err)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name, Organization: []string{"cluster.local"}},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
			KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
		if parent == nil {
			parent, parentKey = tmpl, k
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, k.Public(), parentKey)
		must(t, err)
		c, err := x509.ParseCertificate(der)
		must(t, err)
		return c, k
	}
	root, rootKey := mk("plugged root", nil, nil)
	inter, interKey := mk("plugged intermediate", root, rootKey)
	keyDER, err := x509.MarshalPKCS8PrivateKey(interKey)
	must(t, err)
	p := func(c *x509.Certificate) []byte {
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	}
	for name, data := range map[string][]byte{
		"ca-cert.pem": p(inter), "ca-key.pem": pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		"root-cert.pem": p(root), "cert-chain.pem": append(p(inter), p(root)...),
	} {
		must(t, os.WriteFile(filepath.Join(dir, name), data, 0o600))
	}
	return dir, root, inter
}

type agentProc struct {
	cmd  *exec.Cmd
	done chan struct{}
	stop func()
}

func startAgent(t *testing.T, bins, dir string, env map[string]string) *agentProc {
	t.Helper()
	return startAgentIn(t, bins, dir, env, "")
}

// startAgentIn starts pilot-agent in network namespace netns (by `ip
// netns exec`, which also puts /etc/netns/NETNS/* over /etc, as a VM's
// own hosts and resolv.conf), or in the test's when netns is "".
func startAgentIn(t *testing.T, bins, dir string, env map[string]string, netns string) *agentProc {
	t.Helper()
	cmd := exec.Command(filepath.Join(bins, "pilot-agent"), "proxy")
	if netns != "" {
		cmd = exec.Command("ip", "netns", "exec", netns, filepath.Join(bins, "pilot-agent"), "proxy")
	}
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	logf, err := os.Create(filepath.Join(dir, fmt.Sprintf("agent-%d.log", time.Now().UnixNano())))
	must(t, err)
	cmd.Stdout, cmd.Stderr = logf, logf
	must(t, cmd.Start())
	p := &agentProc{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); logf.Close(); close(p.done) }()
	stopped := false
	p.stop = func() {
		if stopped {
			return
		}
		stopped = true
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("pilot-agent log %s:\n%s", logf.Name(), tail(b, 60))
		}
	}
	t.Cleanup(p.stop)
	return p
}

// checkOutput reads the agent's OUTPUT_CERTS files once they hold the
// certificate with serial, and verifies them against root-cert.pem.
func checkOutput(t *testing.T, dir, serial string) *x509.Certificate {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		data, _ := os.ReadFile(filepath.Join(dir, "cert-chain.pem"))
		if b, rest := pem.Decode(data); b != nil {
			inter := x509.NewCertPool()
			inter.AppendCertsFromPEM(rest)
			leaf, err := x509.ParseCertificate(b.Bytes)
			if err == nil && leaf.SerialNumber.Text(16) == serial {
				if _, err := tls.LoadX509KeyPair(filepath.Join(dir, "cert-chain.pem"), filepath.Join(dir, "key.pem")); err != nil {
					t.Fatalf("agent's key and certificate: %v", err)
				}
				if _, err := leaf.Verify(x509.VerifyOptions{Roots: rootPool(t, filepath.Join(dir, "root-cert.pem")), Intermediates: inter,
					KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
					t.Fatalf("agent's certificate: %v", err)
				}
				return leaf
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s/cert-chain.pem does not hold certificate %s", dir, serial)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func rootPool(t *testing.T, path string) *x509.CertPool {
	data, err := os.ReadFile(path)
	must(t, err)
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(data) {
		t.Fatalf("%s: no certificate", path)
	}
	return p
}

// clusterEnv reads cluster.env as the VM package's shell would (KEY='v').
func clusterEnv(t *testing.T, path string) map[string]string {
	f, err := os.Open(path)
	must(t, err)
	defer f.Close()
	env := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if !ok {
			t.Fatalf("cluster.env line %q", sc.Text())
		}
		env[k] = strings.Trim(v, "'") // envFile quotes no quote in these values
	}
	return env
}

// wellFormedCSR is a well-formed CSR for the group's identity.
func wellFormedCSR(t *testing.T) string {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	u, _ := url.Parse("spiffe://cluster.local/ns/bookinfo/sa/reviews")
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{URIs: []*url.URL{u}}, k)
	must(t, err)
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}))
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func tail(b []byte, n int) string {
	lines := strings.Split(string(b), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

var _ io.Writer = testWriter{}

// TestTokenRevokedWhileRunning: baremeshctl and a running baremeshd share
// the token store; a token revoked with `baremeshctl token revoke` is
// refused on its next use (a replay after revocation), with its reason,
// and the daemon keeps issuing to others.
func TestTokenRevokedWhileRunning(t *testing.T) {
	cfgFile, d := testSetup(t, "")
	ask := func(tok string) error {
		root, err := os.ReadFile(filepath.Join(filepath.Dir(cfgFile), "state", "ca", "root-cert.pem"))
		must(t, err)
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(root)
		conn, err := grpc.NewClient(d.TLSAddr(), grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool, ServerName: "istiod.istio-system.svc"})))
		must(t, err)
		defer conn.Close()
		ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+tok)
		_, err = pb.NewIstioCertificateServiceClient(conn).CreateCertificate(ctx, &pb.IstioCertificateRequest{Csr: wellFormedCSR(t)})
		return err
	}
	create := func() string {
		rc, out, stderr := ctl("token", "create", "--config", cfgFile, "--namespace", "bookinfo", "--service-account", "reviews")
		if rc != 0 {
			t.Fatalf("token create: %s", stderr)
		}
		return strings.TrimSpace(out)
	}
	tok, other := create(), create()
	if err := ask(tok); err != nil {
		t.Fatalf("fresh token: %v", err)
	}
	if rc, _, stderr := ctl("token", "revoke", "--config", cfgFile, strings.Split(tok, ".")[1]); rc != 0 {
		t.Fatalf("revoke: %s", stderr)
	}
	if st := status.Convert(ask(tok)); st.Code() != codes.Unauthenticated || !strings.HasPrefix(st.Message(), "token_revoked:") {
		t.Fatalf("replay after revocation: %v", st)
	}
	if err := ask(other); err != nil {
		t.Fatalf("another token after the refusal: %v", err)
	}
	if _, list, _ := ctl("token", "list", "--config", cfgFile); !strings.Contains(list, "revoked") || strings.Count(list, "valid") != 1 {
		t.Fatalf("token list:\n%s", list)
	}
}
