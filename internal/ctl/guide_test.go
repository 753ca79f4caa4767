package ctl

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3" // the bootstrap's protocol options
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/encoding/protojson"
	"sigs.k8s.io/yaml"

	"github.com/baremesh/baremesh/internal/daemon"
	"github.com/baremesh/baremesh/internal/daemonconfig"
	"github.com/baremesh/baremesh/nodeagent/agent"
)

// guide is README.md's "Putting a VM with Envoy on the mesh" section: its
// files (yaml blocks whose first line is "# PATH") and its commands (sh
// blocks), in order.
type guide struct {
	files    map[string]string
	commands []string
}

func readGuide(t *testing.T) guide {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i, j := strings.Index(s, "<!-- guide:vm-envoy -->"), strings.Index(s, "<!-- /guide -->")
	if i < 0 || j < i {
		t.Fatal("README.md has no <!-- guide:vm-envoy --> ... <!-- /guide --> section")
	}
	g := guide{files: map[string]string{}}
	for _, m := range regexp.MustCompile("(?s)```(yaml|sh)\n(.*?)```").FindAllStringSubmatch(s[i:j], -1) {
		switch m[1] {
		case "yaml":
			first, _, _ := strings.Cut(m[2], "\n")
			if !strings.HasPrefix(first, "# /") {
				t.Fatalf("a yaml block of the guide does not start with its path: %q", first)
			}
			g.files[strings.TrimPrefix(first, "# ")] = m[2]
		case "sh":
			for _, line := range strings.Split(strings.TrimSpace(m[2]), "\n") {
				if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
					g.commands = append(g.commands, line)
				}
			}
		}
	}
	return g
}

// notRunHere are the guide's commands that need a package install and
// systemd; packaging/pkgtest installs the packages and starts, restarts and
// reloads both units in a booted container.
var notRunHere = map[string]bool{
	"apt install ./baremesh_0.1.0_amd64.deb": true,
	"systemctl restart baremesh":             true,
	"systemctl restart baremesh-agent":       true,
}

// guideNetnsEnv marks the test process TestREADMEGuide re-runs in its
// own namespaces.
const guideNetnsEnv = "BAREMESH_GUIDE_NETNS"

// TestREADMEGuide runs the VM onboarding guide as written: its files
// (under a temporary root instead of /etc/baremesh), its baremesh.yaml
// loaded by the daemon's loader and served unchanged (tlsAddr
// 10.0.0.1:15012, the default state directory), its agent.yaml parsed by
// the agent, every baremeshctl command run in order, and the Envoy
// bootstrap validated and used by a real ADS client (node ID, metadata,
// TLS settings, root and token from the files vm bootstrap wrote) before
// proxy-status, which must then show the VM SYNCED. So that the guide's
// addresses and state directory are ours, the test re-runs itself in a
// network namespace of its own where 10.0.0.1 is on loopback, and a
// mount namespace with an empty /var/lib (needs root; skipped without).
func TestREADMEGuide(t *testing.T) {
	if os.Getenv(guideNetnsEnv) == "" {
		if os.Geteuid() != 0 {
			t.Skip("the guide runs in network and mount namespaces of its own: needs root")
		}
		cmd := exec.Command("unshare", "--net", "--mount", os.Args[0], "-test.run=^TestREADMEGuide$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), guideNetnsEnv+"=1")
		out, err := cmd.CombinedOutput()
		t.Logf("in its own namespaces:\n%s", out)
		if err != nil || !strings.Contains(string(out), "--- PASS: TestREADMEGuide") {
			t.Fatalf("the guide failed in its namespaces: %v", err)
		}
		return
	}
	for _, c := range [][]string{
		{"ip", "link", "set", "lo", "up"},
		{"ip", "addr", "add", "10.0.0.1/32", "dev", "lo"},
		{"mount", "-t", "tmpfs", "-o", "mode=0755", "tmpfs", "/var/lib"},
	} {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v: %s", c, err, out)
		}
	}

	g := readGuide(t)
	root := t.TempDir()
	local := func(s string) string {
		s = strings.ReplaceAll(s, "/etc/baremesh", filepath.Join(root, "etc/baremesh"))
		return strings.ReplaceAll(s, " vm-files", " "+filepath.Join(root, "vm-files"))
	}
	for path, body := range g.files {
		p := filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(local(body)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []string{"/etc/baremesh/baremesh.yaml", "/etc/baremesh/conf.d/reviews.yaml", "/etc/baremesh/agent.yaml"} {
		if g.files[want] == "" {
			t.Fatalf("the guide has no %s", want)
		}
	}

	// The control plane, as the guide configures it.
	cfg, err := daemonconfig.ReadFile(filepath.Join(root, "etc/baremesh/baremesh.yaml"))
	if err != nil {
		t.Fatalf("the guide's baremesh.yaml: %v", err)
	}
	cfg.Debounce = daemonconfig.Duration{Duration: 10 * time.Millisecond} // quicker pushes, nothing else changed
	d, err := daemon.New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("baremeshd with the guide's baremesh.yaml: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = d.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-d.Pipeline().Ready():
	case <-time.After(20 * time.Second):
		t.Fatal("daemon not ready within 20s")
	}
	base := "http://" + d.HTTPAddr()

	// The VM's agent.yaml, parsed and validated by the agent itself.
	ac, err := agent.Parse("agent.yaml", []byte(g.files["/etc/baremesh/agent.yaml"]))
	if err != nil {
		t.Fatalf("the guide's agent.yaml: %v", err)
	}
	if ac.ControlPlane.Address != cfg.TLSAddr {
		t.Errorf("agent.yaml's controlPlane.address %q is not the guide's tlsAddr %q", ac.ControlPlane.Address, cfg.TLSAddr)
	}

	connected := false
	for _, line := range g.commands {
		if notRunHere[line] {
			continue
		}
		args := strings.Fields(local(line))
		if args[0] != "baremeshctl" {
			t.Errorf("guide command %q is neither run here nor listed in notRunHere", line)
			continue
		}
		if !connected && (args[1] == "proxy-status" || args[1] == "proxy-config") {
			connectFromBootstrap(t, filepath.Join(root, "vm-files"))
			connected = true
		}
		var out string
		deadline := time.Now().Add(20 * time.Second)
		for {
			code, o, errs := run(base, time.Time{}, args[1:]...)
			out = o
			if code == 0 && (args[1] != "proxy-status" || strings.Count(out, "SYNCED") == 4) {
				break
			}
			if args[1] != "proxy-status" || time.Now().After(deadline) {
				t.Fatalf("guide command %q: exit %d\n%s%s", line, code, o, errs)
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Logf("$ %s\n%s", line, out)
		switch args[1] {
		case "proxy-status":
			if !strings.Contains(out, "reviews-vm-1.bookinfo   sidecar   SYNCED") {
				t.Errorf("proxy-status does not show the VM synced:\n%s", out)
			}
		case "proxy-config":
			if !strings.Contains(out, "reviews.bookinfo.mesh   9080   -        outbound    EDS") {
				t.Errorf("proxy-config clusters lacks reviews:\n%s", out)
			}
		case "analyze":
			if !strings.Contains(out, "No validation issues") {
				t.Errorf("the guide's config has analyzer findings:\n%s", out)
			}
		}
	}
	if !connected {
		t.Error("the guide never checks with proxy-status")
	}
}

// connectFromBootstrap validates the Envoy bootstrap the guide wrote into
// dir and connects as that Envoy would: its node, ADS to its xds-grpc
// cluster's address over TLS (the server name and SAN it names, the
// root-cert.pem written beside it, which the guide copies to the path the
// bootstrap names) with its initial metadata (the join token).
func connectFromBootstrap(t *testing.T, dir string) {
	t.Helper()
	y, err := os.ReadFile(filepath.Join(dir, "envoy-bootstrap.yaml"))
	if err != nil {
		t.Fatalf("vm bootstrap --envoy wrote no bootstrap: %v", err)
	}
	j, err := yaml.YAMLToJSON(y)
	if err != nil {
		t.Fatal(err)
	}
	var b bootstrapv3.Bootstrap
	if err := protojson.Unmarshal(j, &b); err != nil {
		t.Fatalf("bootstrap: %v", err)
	}
	if err := b.ValidateAll(); err != nil {
		t.Fatalf("bootstrap fails go-control-plane's validation: %v", err)
	}
	if id := b.GetNode().GetId(); id != "sidecar~10.0.0.11~reviews-vm-1.bookinfo~bookinfo.svc.cluster.local" {
		t.Errorf("node ID %q", id)
	}
	c := b.GetStaticResources().GetClusters()[0]
	sa := c.GetLoadAssignment().GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress()
	if sa.GetAddress() != "10.0.0.1" || sa.GetPortValue() != 15012 {
		t.Errorf("xds-grpc points at %s:%d, want the guide's 10.0.0.1:15012", sa.GetAddress(), sa.GetPortValue())
	}
	var tc tlsv3.UpstreamTlsContext
	if err := c.GetTransportSocket().GetTypedConfig().UnmarshalTo(&tc); err != nil {
		t.Fatalf("xds-grpc has no TLS transport socket: %v", err)
	}
	vc := tc.GetCommonTlsContext().GetValidationContext()
	if vc.GetTrustedCa().GetFilename() != "/etc/baremesh/root-cert.pem" || vc.GetMatchTypedSubjectAltNames()[0].GetMatcher().GetExact() != tc.GetSni() {
		t.Errorf("TLS context: %v", &tc)
	}
	rootPEM, err := os.ReadFile(filepath.Join(dir, "root-cert.pem"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(rootPEM) {
		t.Fatal("vm-files/root-cert.pem holds no certificate")
	}
	svc := b.GetDynamicResources().GetAdsConfig().GetGrpcServices()[0]
	if svc.GetEnvoyGrpc().GetClusterName() != "xds-grpc" {
		t.Error("ADS does not use the xds-grpc cluster")
	}
	md := map[string]string{}
	for _, h := range svc.GetInitialMetadata() {
		md[h.GetKey()] = h.GetValue()
	}
	connectNode(t, net.JoinHostPort(sa.GetAddress(), fmt.Sprint(sa.GetPortValue())), b.GetNode(), nil,
		grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool, ServerName: tc.GetSni(), MinVersion: tls.VersionTLS12})),
		grpc.WithPerRPCCredentials(headers(md)))
}

// headers sends fixed metadata on every RPC, as Envoy's initial_metadata.
type headers map[string]string

func (h headers) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return h, nil
}
func (h headers) RequireTransportSecurity() bool { return true }
