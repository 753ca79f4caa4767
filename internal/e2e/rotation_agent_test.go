package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/baremesh/baremesh/internal/ctl"
	"github.com/baremesh/baremesh/internal/daemon"
	"github.com/baremesh/baremesh/internal/daemonconfig"
	"github.com/baremesh/baremesh/internal/onboard"
)

// Helpers for running Istio's pilot-agent as a VM against a baremeshd
// with the TLS port on (internal/onboard's tests have their own; this
// package cannot import test files).

const rotationGroupYAML = `apiVersion: networking.istio.io/v1
kind: WorkloadGroup
metadata: {name: reviews, namespace: bookinfo}
spec:
  metadata:
    labels: {app: reviews}
  template:
    serviceAccount: reviews
    ports: {grpc: 9080}
`

// startCADaemon writes a config dir with the WorkloadGroup and a
// baremesh.yaml (extra appended), and runs a real daemon with the TLS port.
func startCADaemon(t *testing.T, extra string) (cfgFile string, d *daemon.Daemon) {
	t.Helper()
	dir := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(dir, "conf.d"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "conf.d", "wg.yaml"), []byte(rotationGroupYAML), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "meshconfig.yaml"), []byte("trustDomain: cluster.local\n"), 0o644))
	cfgFile = filepath.Join(dir, "baremesh.yaml")
	must(t, os.WriteFile(cfgFile, []byte("configDirs: [conf.d]\nmeshConfig: meshconfig.yaml\nstateDir: state\n"+
		"xdsAddr: 127.0.0.1:0\nhttpAddr: 127.0.0.1:0\ntlsAddr: 127.0.0.1:0\n"+extra), 0o644))
	cfg, err := daemonconfig.ReadFile(cfgFile)
	must(t, err)
	d, err = daemon.New(cfg, slog.New(slog.NewTextHandler(logWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})))
	must(t, err)
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

type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// agentVM is a VM's files as Istio's VM package lays them out, under dir.
type agentVM struct {
	dir, certs string
	env        map[string]string
}

// bootstrapVM runs `baremeshctl vm bootstrap` and lays the files out for
// pilot-agent (proxyless: DISABLE_ENVOY; PROV_CERT = OUTPUT_CERTS, as
// Istio's istio-start.sh sets them on a VM).
func bootstrapVM(t *testing.T, d *daemon.Daemon, cfgFile string, secretTTL time.Duration) *agentVM {
	t.Helper()
	boot := t.TempDir()
	var out, errOut bytes.Buffer
	if rc := onboard.Main([]string{"vm", "bootstrap", "--config", cfgFile, "--namespace", "bookinfo", "--group", "reviews",
		"--out", boot, "--address", d.TLSAddr(), "--ttl", "10m"}, &out, &errOut); rc != 0 {
		t.Fatalf("vm bootstrap: %d: %s", rc, errOut.String())
	}
	vm := &agentVM{dir: t.TempDir()}
	vm.certs = filepath.Join(vm.dir, "etc", "certs")
	for from, to := range map[string]string{"mesh.yaml": "etc/istio/config/mesh", "istio-token": "var/run/secrets/tokens/istio-token", "root-cert.pem": "etc/certs/root-cert.pem"} {
		data, err := os.ReadFile(filepath.Join(boot, from))
		must(t, err)
		must(t, os.MkdirAll(filepath.Dir(filepath.Join(vm.dir, to)), 0o755))
		must(t, os.WriteFile(filepath.Join(vm.dir, to), data, 0o600))
	}
	f, err := os.Open(filepath.Join(boot, "cluster.env"))
	must(t, err)
	defer f.Close()
	vm.env = map[string]string{}
	for sc := bufio.NewScanner(f); sc.Scan(); {
		k, v, _ := strings.Cut(sc.Text(), "=")
		vm.env[k] = strings.Trim(v, "'")
	}
	_, port, _ := net.SplitHostPort(d.TLSAddr())
	// The agent checks the CA's certificate for istiod.istio-system.svc
	// whatever name it dials; the test does not edit /etc/hosts.
	vm.env["CA_ADDR"] = "localhost:" + port
	vm.env["DISABLE_ENVOY"] = "true"
	vm.env["PROV_CERT"], vm.env["OUTPUT_CERTS"] = vm.certs, vm.certs
	vm.env["SECRET_TTL"] = secretTTL.String() // renewed at about half of it
	vm.env["ISTIO_META_DNS_CAPTURE"] = "false"
	vm.env["PROXY_CONFIG"] = fmt.Sprintf(`{"statusPort": %d}`, freeTCPPort(t))
	return vm
}

// pilotAgent returns Istio's pilot-agent (shared/tools/istio-bins) or skips.
func pilotAgent(t *testing.T) string {
	t.Helper()
	if d := os.Getenv("ISTIO_BINS"); d != "" {
		return filepath.Join(d, "pilot-agent")
	}
	home, _ := os.UserHomeDir()
	bin := findOne(filepath.Join(home, ".cache", "istio-bins", "*", "pilot-agent"))
	if bin == "" {
		t.Skip("skipping: needs Istio's pilot-agent (shared/tools/istio-bins, or ISTIO_BINS)")
	}
	return bin
}

// start runs pilot-agent for the VM until the test ends.
func (vm *agentVM) start(t *testing.T, bin string) {
	t.Helper()
	cmd := exec.Command(bin, "proxy")
	cmd.Dir = vm.dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + vm.dir}
	for k, v := range vm.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	logf, err := os.Create(filepath.Join(vm.dir, "agent.log"))
	must(t, err)
	cmd.Stdout, cmd.Stderr = logf, logf
	must(t, cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("pilot-agent log %s:\n%s", logf.Name(), tail(string(b), 6000))
		}
	})
}

// holds reads what the agent wrote: the fingerprints of its trust bundle
// (root-cert.pem) and of the root its certificate chains to ("" while
// it has none, or while the files are being rewritten).
func (vm *agentVM) holds() (bundle []string, leafRoot string) {
	rootPEM, _ := os.ReadFile(filepath.Join(vm.certs, "root-cert.pem"))
	pool := x509.NewCertPool()
	for _, c := range pemCerts(rootPEM) {
		bundle = append(bundle, fingerprint(c))
		pool.AddCert(c)
	}
	chain, _ := os.ReadFile(filepath.Join(vm.certs, "cert-chain.pem"))
	certs := pemCerts(chain)
	if len(certs) == 0 || len(certs[0].URIs) == 0 {
		return bundle, ""
	}
	chains, err := certs[0].Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	if err != nil {
		return bundle, ""
	}
	return bundle, fingerprint(chains[0][len(chains[0])-1])
}

func pemCerts(data []byte) []*x509.Certificate {
	var out []*x509.Certificate
	for b, rest := pem.Decode(data); b != nil; b, rest = pem.Decode(rest) {
		if c, err := x509.ParseCertificate(b.Bytes); err == nil {
			out = append(out, c)
		}
	}
	return out
}

// fingerprint is identity.Fingerprint, computed here as a client would.
func fingerprint(c *x509.Certificate) string {
	sum := sha256.Sum256(c.Raw)
	return hex.EncodeToString(sum[:8])
}

func freeTCPPort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// runCtl runs baremeshctl's command table in process.
func runCtl(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	rc := ctl.Main(args, &out, &errOut)
	return rc, out.String(), errOut.String()
}

// csrPEM is a CSR for the group's identity with a fresh key (PEM).
func csrPEM(t *testing.T) (csr string, key []byte) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	u, _ := url.Parse("spiffe://cluster.local/ns/bookinfo/sa/reviews")
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{URIs: []*url.URL{u}}, k)
	must(t, err)
	kd, err := x509.MarshalPKCS8PrivateKey(k)
	must(t, err)
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kd})
}
