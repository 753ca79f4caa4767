package onboard

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/baremesh/baremesh/core/testkit"
)

// TestPilotAgentProxyConfig runs Istio's pilot-agent with
// PROXY_CONFIG_XDS_AGENT=true (dynamic proxy config): once something
// asks it for listeners, its xDS proxy asks baremeshd for
// istio.mesh.v1alpha1.ProxyConfig over the TLS port and adds the trust
// bundle it gets to the roots it serves as ROOTCA (here, proxyless, in
// OUTPUT_CERTS' root-cert.pem). A root added to the mesh config's
// caCertificates while the agent runs reaches that file; removed, it
// leaves it; baremeshd's own root stays throughout.
func TestPilotAgentProxyConfig(t *testing.T) {
	bins := istioBins(t)
	cfgFile, d := testSetup(t, "")
	_, vm, certs, env := prepareVM(t, d, cfgFile, time.Hour)
	_, tlsPort, _ := net.SplitHostPort(d.TLSAddr())
	env["PROXY_CONFIG"] = fmt.Sprintf(`{"statusPort": %d, "discoveryAddress": "localhost:%s"}`, freePort(t), tlsPort)
	env["INSTANCE_IP"] = "127.0.0.1"
	env["PROXY_CONFIG_XDS_AGENT"] = "true"
	startAgent(t, bins, vm, env)
	_, waitIssued := certzOf(t, d)
	waitIssued(1, "the first certificate", 60*time.Second)

	sock := filepath.Join(vm, "etc", "istio", "proxy", "XDS")
	bootFile := filepath.Join(vm, "etc", "istio", "proxy", "grpc-bootstrap.json")
	testkit.EventuallyWithin(t, 30*time.Second, "the agent's XDS socket and node", func() bool {
		_, e1 := os.Stat(sock)
		_, e2 := os.Stat(bootFile)
		return e1 == nil && e2 == nil
	})
	fakeEnvoy(t, sock, agentNode(t, bootFile), false)

	own := d.Pipeline().Current().TrustRoots
	if len(own) == 0 {
		t.Fatal("the daemon's snapshot carries no CA roots")
	}
	roots := func() string {
		b, _ := os.ReadFile(filepath.Join(certs, "root-cert.pem"))
		return string(b)
	}
	extra := caPEM(t, "another mesh's root")
	meshFile := filepath.Join(filepath.Dir(cfgFile), "meshconfig.yaml")
	writeMesh := func(body string) {
		tmp := meshFile + ".tmp"
		must(t, os.WriteFile(tmp, []byte(body), 0o644))
		must(t, os.Rename(tmp, meshFile))
	}
	indented := "      " + strings.ReplaceAll(strings.TrimSpace(extra), "\n", "\n      ")
	writeMesh("trustDomain: cluster.local\ncaCertificates:\n- pem: |\n" + indented + "\n  trustDomains: [other.example]\n")
	start := time.Now()
	testkit.EventuallyWithin(t, 60*time.Second, "the mesh config's extra root in the agent's root-cert.pem", func() bool {
		r := roots()
		return strings.Contains(r, extra) && strings.Contains(r, strings.TrimSpace(string(own)))
	})
	t.Logf("mesh config write to the agent's root-cert.pem with the new root: %v", time.Since(start).Round(time.Millisecond))

	writeMesh("trustDomain: cluster.local\n")
	testkit.EventuallyWithin(t, 60*time.Second, "the extra root gone from root-cert.pem", func() bool {
		r := roots()
		return !strings.Contains(r, extra) && strings.Contains(r, strings.TrimSpace(string(own)))
	})
}

// caPEM makes a self-signed CA certificate in PEM.
func caPEM(t *testing.T, cn string) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	must(t, err)
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}
