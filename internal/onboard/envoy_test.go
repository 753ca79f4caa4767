package onboard

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"sigs.k8s.io/yaml"

	"github.com/baremesh/baremesh/core/identity"
)

const envoyGroup = `apiVersion: networking.istio.io/v1
kind: WorkloadGroup
metadata: {name: web, namespace: shop}
spec:
  metadata: {labels: {app: web}}
  template: {serviceAccount: web-sa, network: net1}
`

// TestEnvoyBootstrap: vm bootstrap --envoy writes a bootstrap that passes
// go-control-plane's validation, with Istio's node ID and the group's
// metadata, ADS over TLS to --address (the server checked against the
// CA's root, written beside it, under the host name) with a join token
// of the group's service account as its bearer credential, in a file
// only its owner reads; a host name is resolved by DNS, an IP
// statically; missing --ip and an unknown group are errors naming what
// is wrong. (The bootstrap used against a running daemon: internal/ctl's
// TestREADMEGuide.)
func TestEnvoyBootstrap(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "conf.d")
	if err := os.MkdirAll(conf, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(conf, "wg.yaml"), []byte(envoyGroup), 0o644); err != nil {
		t.Fatal(err)
	}
	cfgFile := filepath.Join(dir, "baremesh.yaml")
	if err := os.WriteFile(cfgFile, []byte("configDirs: [conf.d]\nstateDir: state\ntlsAddr: 0.0.0.0:15012\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := identity.LoadCA(identity.CAOptions{Dir: filepath.Join(dir, "state", "ca")}); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	rc, stdout, stderr := ctl("vm", "bootstrap", "--config", cfgFile, "--envoy", "--ip", "10.1.2.3", "--namespace", "shop", "--group", "web",
		"--address", "cp.example.internal:15012", "--out", out)
	if rc != 0 || !strings.Contains(stdout, "node sidecar~10.1.2.3~web-10-1-2-3.shop~shop.svc.cluster.local") {
		t.Fatalf("rc %d %s %s", rc, stdout, stderr)
	}
	y, err := os.ReadFile(filepath.Join(out, EnvoyBootstrapFile))
	if err != nil {
		t.Fatal(err)
	}
	j, err := yaml.YAMLToJSON(y)
	if err != nil {
		t.Fatal(err)
	}
	var b bootstrapv3.Bootstrap
	if err := protojson.Unmarshal(j, &b); err != nil {
		t.Fatal(err)
	}
	if err := b.ValidateAll(); err != nil {
		t.Fatal(err)
	}
	md := b.GetNode().GetMetadata().GetFields()
	if md["NAMESPACE"].GetStringValue() != "shop" || md["SERVICE_ACCOUNT"].GetStringValue() != "web-sa" || md["NETWORK"].GetStringValue() != "net1" ||
		md["LABELS"].GetStructValue().GetFields()["app"].GetStringValue() != "web" || md["INSTANCE_IPS"].GetStringValue() != "10.1.2.3" {
		t.Errorf("metadata: %v", md)
	}
	c := b.GetStaticResources().GetClusters()[0]
	if c.GetType().String() != "STRICT_DNS" || c.GetLoadAssignment().GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress().GetAddress() != "cp.example.internal" {
		t.Errorf("xds-grpc cluster: %v", c)
	}
	var tc tlsv3.UpstreamTlsContext
	if err := c.GetTransportSocket().GetTypedConfig().UnmarshalTo(&tc); err != nil {
		t.Fatalf("xds-grpc has no TLS: %v", err)
	}
	vc := tc.GetCommonTlsContext().GetValidationContext()
	if tc.GetSni() != "cp.example.internal" || vc.GetTrustedCa().GetFilename() != EnvoyRootCert ||
		vc.GetMatchTypedSubjectAltNames()[0].GetMatcher().GetExact() != "cp.example.internal" {
		t.Errorf("TLS context: %v", &tc)
	}
	root, _ := os.ReadFile(filepath.Join(dir, "state", "ca", identity.RootCertFile))
	if got, _ := os.ReadFile(filepath.Join(out, identity.RootCertFile)); len(root) == 0 || string(got) != string(root) {
		t.Error("root-cert.pem beside the bootstrap is not the CA's")
	}
	md0 := b.GetDynamicResources().GetAdsConfig().GetGrpcServices()[0].GetInitialMetadata()
	if len(md0) != 1 || md0[0].GetKey() != "authorization" || !strings.HasPrefix(md0[0].GetValue(), "Bearer bmt1.") {
		t.Errorf("ADS metadata: %v", md0)
	}
	if _, list, _ := ctl("token", "list", "--config", cfgFile); !strings.Contains(list, "web-sa") {
		t.Errorf("no token for web-sa in the store:\n%s", list)
	}
	if st, _ := os.Stat(filepath.Join(out, EnvoyBootstrapFile)); st.Mode().Perm() != 0o600 {
		t.Errorf("bootstrap mode %v, want 0600 (it holds a credential)", st.Mode())
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--namespace", "shop", "--group", "web"}, `--ip ""`},
		{[]string{"--ip", "10.1.2.3", "--namespace", "shop", "--group", "nope"}, "WorkloadGroup shop/nope not found"},
		{[]string{"--ip", "10.1.2.3", "--namespace", "shop", "--group", "web", "--address", "noport"}, `--address "noport"`},
	} {
		args := append([]string{"vm", "bootstrap", "--config", cfgFile, "--envoy", "--out", out}, tc.args...)
		if rc, _, stderr := ctl(args...); rc != 1 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: rc %d, %q (want %q)", tc.args, rc, stderr, tc.want)
		}
	}
}
