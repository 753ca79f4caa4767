package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	meshv1alpha1 "istio.io/api/mesh/v1alpha1"

	"github.com/baremesh/baremesh/core/config"
)

func TestDefaultMeshConfig(t *testing.T) {
	m := config.DefaultMeshConfig()
	checks := []struct {
		name      string
		got, want any
	}{
		{"proxyListenPort", m.GetProxyListenPort(), int32(15001)},
		{"proxyInboundListenPort", m.GetProxyInboundListenPort(), int32(15006)},
		{"connectTimeout", m.GetConnectTimeout().AsDuration(), 10 * time.Second},
		{"trustDomain", m.GetTrustDomain(), "cluster.local"},
		{"rootNamespace", m.GetRootNamespace(), "istio-system"},
		{"outboundTrafficPolicy", m.GetOutboundTrafficPolicy().GetMode(), meshv1alpha1.MeshConfig_OutboundTrafficPolicy_ALLOW_ANY},
		{"enableAutoMtls", m.GetEnableAutoMtls().GetValue(), true},
		{"localityLbSetting.enabled", m.GetLocalityLbSetting().GetEnabled().GetValue(), true},
		{"defaultServiceExportTo", strings.Join(m.GetDefaultServiceExportTo(), ","), "*"},
		{"defaultVirtualServiceExportTo", strings.Join(m.GetDefaultVirtualServiceExportTo(), ","), "*"},
		{"defaultDestinationRuleExportTo", strings.Join(m.GetDefaultDestinationRuleExportTo(), ","), "*"},
		{"dnsRefreshRate", m.GetDnsRefreshRate().AsDuration(), 60 * time.Second},
		{"defaultConfig.proxyAdminPort", m.GetDefaultConfig().GetProxyAdminPort(), int32(15000)},
		{"defaultConfig.statusPort", m.GetDefaultConfig().GetStatusPort(), int32(15020)},
		{"defaultConfig.discoveryAddress", m.GetDefaultConfig().GetDiscoveryAddress(), "istiod.istio-system.svc:15012"},
		{"defaultConfig.drainDuration", m.GetDefaultConfig().GetDrainDuration().AsDuration(), 45 * time.Second},
		{"defaultConfig.serviceCluster", m.GetDefaultConfig().GetServiceCluster(), "istio-proxy"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	// The defaults are valid, and every call returns a fresh value.
	parsed, err := config.ParseMeshConfig(nil, "empty.yaml")
	if err != nil {
		t.Fatalf("empty file: %v", err)
	}
	if !proto.Equal(parsed, m) {
		t.Errorf("an empty file does not give the defaults")
	}
	m.TrustDomain = "changed"
	if config.DefaultMeshConfig().GetTrustDomain() != "cluster.local" {
		t.Errorf("DefaultMeshConfig returned a shared value")
	}
}

func TestParseMeshConfigOverride(t *testing.T) {
	const file = `
trustDomain: example.org
enableTracing: false
outboundTrafficPolicy:
  mode: REGISTRY_ONLY
defaultServiceExportTo: ["."]
dnsRefreshRate: 5m
trustDomainAliases: [old.example.org]
extensionProviders:
- name: envoy
  envoyFileAccessLog: {path: /var/log/access.log}
- name: otel
  opentelemetry: {service: otel.observability.svc.cluster.local, port: 4317}
defaultConfig:
  proxyAdminPort: 15100
  drainDuration: 10s
  proxyMetadata: {ISTIO_META_DNS_CAPTURE: "true"}
`
	m, err := config.ParseMeshConfig([]byte(file), "mesh.yaml")
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"trustDomain", m.GetTrustDomain(), "example.org"},
		{"enableTracing overridden with a zero value", m.GetEnableTracing(), false},
		{"outboundTrafficPolicy", m.GetOutboundTrafficPolicy().GetMode(), meshv1alpha1.MeshConfig_OutboundTrafficPolicy_REGISTRY_ONLY},
		{"defaultServiceExportTo replaced", strings.Join(m.GetDefaultServiceExportTo(), ","), "."},
		{"dnsRefreshRate in Go syntax", m.GetDnsRefreshRate().AsDuration(), 5 * time.Minute},
		{"trustDomainAliases", strings.Join(m.GetTrustDomainAliases(), ","), "old.example.org"},
		{"connectTimeout default kept", m.GetConnectTimeout().AsDuration(), 10 * time.Second},
		{"proxyListenPort default kept", m.GetProxyListenPort(), int32(15001)},
		{"defaultConfig.proxyAdminPort", m.GetDefaultConfig().GetProxyAdminPort(), int32(15100)},
		{"defaultConfig.drainDuration", m.GetDefaultConfig().GetDrainDuration().AsDuration(), 10 * time.Second},
		{"defaultConfig.statusPort default kept", m.GetDefaultConfig().GetStatusPort(), int32(15020)},
		{"defaultConfig.discoveryAddress default kept", m.GetDefaultConfig().GetDiscoveryAddress(), "istiod.istio-system.svc:15012"},
		{"defaultConfig.proxyMetadata", m.GetDefaultConfig().GetProxyMetadata()["ISTIO_META_DNS_CAPTURE"], "true"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	var names []string
	for _, p := range m.GetExtensionProviders() {
		names = append(names, p.GetName())
	}
	if got := strings.Join(names, ","); got != "envoy,otel,prometheus,stackdriver" {
		t.Errorf("extensionProviders = %s, want the file's then the other defaults", got)
	}
	if p := m.GetExtensionProviders()[0].GetEnvoyFileAccessLog().GetPath(); p != "/var/log/access.log" {
		t.Errorf("envoy provider path = %q, want the file's", p)
	}
}

func TestParseMeshConfigErrors(t *testing.T) {
	for _, c := range []struct {
		name, file string
		want       []string
		sentinel   error
	}{
		{"bad YAML names the line", "trustDomain: a\nproxyListenPort: [1\nrootNamespace: x\n", []string{"mesh.yaml:2:", "yaml"}, config.ErrParse},
		{"unknown field names it and its line", "trustDomain: a\nbogusField: 1\n", []string{"mesh.yaml:2:", "bogusField"}, config.ErrInvalid},
		{"unknown nested field", "defaultConfig:\n  proxyAdminPort: 1\n  nope: true\n", []string{"mesh.yaml:3:", "nope"}, config.ErrInvalid},
		{"bad port", "proxyListenPort: 70000\n", []string{"mesh.yaml", "proxyListenPort"}, config.ErrInvalid},
		{"bad proxy port", "defaultConfig: {statusPort: -1}\n", []string{"defaultConfig.statusPort"}, config.ErrInvalid},
		{"empty trust domain", "trustDomain: \"\"\n", []string{"trustDomain"}, config.ErrInvalid},
		{"short connect timeout", "connectTimeout: 0.0001s\n", []string{"connectTimeout"}, config.ErrInvalid},
		{"bad duration", "dnsRefreshRate: soon\n", []string{"mesh.yaml", "soon"}, config.ErrInvalid},
		{"bad discovery address", "defaultConfig: {discoveryAddress: \"istiod\"}\n", []string{"defaultConfig.discoveryAddress"}, config.ErrInvalid},
		{"bad exportTo", "defaultServiceExportTo: [\"*\", foo]\n", []string{"defaultServiceExportTo"}, config.ErrInvalid},
		{"not a mapping", "- a\n- b\n", []string{"mesh.yaml", "mapping"}, config.ErrParse},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := config.ParseMeshConfig([]byte(c.file), "mesh.yaml")
			if err == nil {
				t.Fatalf("want an error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if !errors.Is(err, c.sentinel) {
				t.Errorf("error %q is not %v", err, c.sentinel)
			}
			var de *config.DocError
			if !errors.As(err, &de) || de.File != "mesh.yaml" {
				t.Errorf("error %q is not a DocError for mesh.yaml", err)
			}
		})
	}
}

func TestLoadMeshConfig(t *testing.T) {
	dir := t.TempDir()
	m, err := config.LoadMeshConfig(filepath.Join(dir, "missing.yaml"))
	if err != nil {
		t.Fatalf("missing file: %v", err)
	}
	if !proto.Equal(m, config.DefaultMeshConfig()) {
		t.Errorf("a missing file does not give the defaults")
	}
	p := filepath.Join(dir, "mesh.yaml")
	if err := os.WriteFile(p, []byte("rootNamespace: mesh-root\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err = config.LoadMeshConfig(p)
	if err != nil {
		t.Fatal(err)
	}
	if m.GetRootNamespace() != "mesh-root" {
		t.Errorf("rootNamespace = %q", m.GetRootNamespace())
	}
	if err := os.WriteFile(p, []byte("proxyListenPort: 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := config.LoadMeshConfig(p); err == nil || !strings.Contains(err.Error(), p) {
		t.Errorf("invalid file: got %v, want an error naming %s", err, p)
	}
}
