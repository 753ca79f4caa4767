package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/baremesh/baremesh/internal/daemonconfig"
)

func TestLoadMCPUpstreams(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "baremesh.yaml")
	good := `mcp:
- name: istiod
  address: xds://istiod.istio-system:15010
- name: nacos
  address: nacos:18848
  delta: true
  kinds: [ServiceEntry, networking.istio.io/v1alpha3/VirtualService]
  tlsSettings: {mode: MUTUAL, caCertificates: ca.pem, clientCertificate: cert.pem, privateKey: key.pem}
`
	if err := os.WriteFile(path, []byte(good), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, _, err := daemonconfig.Load([]string{"--config", path})
	if err != nil {
		t.Fatalf("mcp upstreams without configDirs: %v", err)
	}
	if len(cfg.MCP) != 2 || cfg.MCP[1].TLSSettings.CACertificates != filepath.Join(dir, "ca.pem") {
		t.Fatalf("mcp = %+v", cfg.MCP)
	}
	for bad, want := range map[string]string{
		"mcp: [{name: a, address: 'http://x:1'}]":                       "only xds://host:port",
		"mcp: [{name: a, address: 'x:1', kinds: [Bogus]}]":              `unknown kind "Bogus"`,
		"mcp: [{name: a, address: 'x:1'}, {name: a, address: 'y:1'}]":   `name "a" used twice`,
		"mcp: [{name: a, address: 'x:1', tlsSettings: {mode: MUTUAL}}]": "MUTUAL needs clientCertificate",
		"mcp: [{name: a, address: 'x'}]":                                "is not xds://HOST:PORT",
	} {
		if err := os.WriteFile(path, []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, _, err := daemonconfig.Load([]string{"--config", path}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want it to contain %q", bad, err, want)
		}
	}
}
