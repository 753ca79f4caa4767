package agent

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/baremesh/baremesh/nodeagent/iptables"
)

func TestExampleConfigLoads(t *testing.T) {
	c, err := Load(filepath.Join("..", "..", "examples", "agent.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Capture.Mode != iptables.ModeRedirect || !c.Capture.CaptureDNS || c.Proxy == nil || c.Interval != 10*time.Second {
		t.Errorf("example config decoded as %+v", c)
	}
	if _, err := iptables.Render(c.Capture.Config); err != nil {
		t.Errorf("example capture config does not render: %v", err)
	}
	if c.Tunnel.Enabled || c.Repair.Enabled {
		t.Error("the example must keep tunnel and repair disabled")
	}
	// Enabled as shown, both sections are valid.
	data, err := os.ReadFile(filepath.Join("..", "..", "examples", "agent.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Parse("agent.yaml (enabled)", []byte(strings.ReplaceAll(string(data), "enabled: false", "enabled: true"))); err != nil {
		t.Errorf("example with tunnel and repair enabled: %v", err)
	}
}

func TestEmptyConfigIsDefaults(t *testing.T) {
	c, err := Parse("empty.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Capture.OutboundPort != 15001 || c.StatusAddress != "127.0.0.1:15022" {
		t.Errorf("defaults not applied: %+v", c)
	}
}

func TestConfigBadInput(t *testing.T) {
	cases := []struct{ name, yaml, want string }{
		{"not YAML", "capture: [unclosed\n", "not valid agent YAML"},
		{"not a mapping", "just a string\n", "not valid agent YAML"},
		{"unknown field", "capture:\n  modee: TPROXY\n", "field modee not found"},
		{"invalid CIDR", "capture:\n  outboundIPRanges: [10.0.0.0/99]\n", "outboundIPRanges[0]: invalid CIDR"},
		{"port out of range", "capture:\n  inboundPort: 70000\n", "inboundPort: port 70000 out of range"},
		{"inbound equals outbound", "capture:\n  inboundPort: 15001\n", "inboundPort: must differ from outboundPort"},
		{"include and exclude", "capture:\n  outboundPortsInclude: [443]\n  outboundPortsExclude: [443]\n", "outboundPortsExclude: port 443 is also in outboundPortsInclude"},
		{"uid not a number", "capture:\n  proxyUID: istio-proxy\n", "proxyUID: \"istio-proxy\" is not a number"},
		{"unknown mode", "capture:\n  mode: EBPF\n", "mode: unknown mode \"EBPF\""},
		{"port not a number", "capture:\n  inboundPort: http\n", "agent.yaml:2: capture.inboundPort: not valid agent YAML: cannot unmarshal"},
		{"unknown backend", "capture:\n  backend: iptables\n", "capture.backend: unknown backend"},
		{"proxy without path", "proxy:\n  args: [-c, x]\n", "proxy.path: required"},
		{"bad log level", "log:\n  level: loud\n", "log.level"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("agent.yaml", []byte(tc.yaml))
			if err == nil {
				t.Fatal("accepted")
			}
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "agent.yaml") {
				t.Errorf("error %q: want ErrConfig naming the file and containing %q", err, tc.want)
			}
		})
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

func FuzzParse(f *testing.F) {
	data, err := os.ReadFile(filepath.Join("..", "..", "examples", "agent.yaml"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add([]byte("capture: {mode: TPROXY, inboundPorts: ['80']}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Parse("fuzz.yaml", b)
		if err == nil && !c.Capture.Disabled {
			if _, err := iptables.Render(c.Capture.Config); err != nil {
				t.Errorf("validated config does not render: %v", err)
			}
		}
	})
}

func TestTunnelAndRepairConfig(t *testing.T) {
	c, err := Parse("t.yaml", []byte(`
tunnel: {enabled: true, kind: vxlan, nodeUnderlay: 10.0.0.1, proxyUnderlay: 10.0.0.2, proxyNetns: ztunnel}
repair: {enabled: true, node: n1}
`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Tunnel.Port != 4789 || c.Tunnel.ProxyNetNS != "ztunnel" || c.Repair.Mode != "label" || c.Repair.DeleteBurst != 5 {
		t.Errorf("decoded as %+v / %+v", c.Tunnel, c.Repair)
	}
	for _, tc := range []struct{ name, yaml, want string }{
		{"tunnel underlay", "tunnel: {enabled: true, proxyNetns: p, proxyUnderlay: 10.0.0.2}\n", "t.yaml:1: tunnel.nodeUnderlay: an IPv4 address is required"},
		{"tunnel netns", "tunnel: {enabled: true, nodeUnderlay: 10.0.0.1, proxyUnderlay: 10.0.0.2}\n", "tunnel.proxyNetns"},
		{"tunnel backend", "tunnel: {enabled: true, nodeUnderlay: 10.0.0.1, proxyUnderlay: 10.0.0.2, proxyNetns: p, backend: x}\n", "tunnel.backend"},
		{"tunnel field", "tunnel: {enabled: true, vnii: 3}\n", "vnii"},
		{"repair node", "repair: {enabled: true}\n", "repair.node"},
		{"repair mode", "repair: {enabled: true, node: n, mode: evict}\n", "repair.mode"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("t.yaml", []byte(tc.yaml))
			if err == nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Parse: %v; want an ErrConfig naming %q", err, tc.want)
			}
		})
	}
	// Disabled sections are not validated.
	if _, err := Parse("t.yaml", []byte("tunnel: {enabled: false}\nrepair: {enabled: false}\n")); err != nil {
		t.Errorf("disabled sections: %v", err)
	}
}

// TestConfigProblemsNameLineAndField: every problem names the file, the
// line and the field (by YAML path), whether the decoder or Validate
// found it; a field that is missing is placed at its section.
func TestConfigProblemsNameLineAndField(t *testing.T) {
	const file = `# agent.yaml
capture:
  mode: REDIRECT
  inboundPort: 70000
  outboundIPRangesExclude:
    - 10.0.0.0/8
    - 300.0.0.0/8
tunnel:
  enabled: true
  kind: vxlan
  nodeUnderlay: 10.0.0.1
  proxyUnderlay: 10.0.0.2
  excludeCIDRs: [fd00::/8]
repair:
  enabled: true
log: {level: loud}
`
	_, err := Parse("agent.yaml", []byte(file))
	var ce *ConfigError
	if !errors.As(err, &ce) || !errors.Is(err, ErrConfig) {
		t.Fatalf("Parse = %v, want a *ConfigError", err)
	}
	var got []string
	for _, p := range ce.Problems {
		got = append(got, p.String())
	}
	want := []string{
		"agent.yaml:4: capture.inboundPort: port 70000 out of range (1-65535)",
		`agent.yaml:7: capture.outboundIPRangesExclude[1]: invalid CIDR "300.0.0.0/8": netip.ParsePrefix("300.0.0.0/8"): ParseAddr("300.0.0.0"): IPv4 field has value >255`,
		"agent.yaml:13: tunnel.podCIDRs/excludeCIDRs: fd00::/8 is not an IPv4 prefix (IPv6 prefixes need ipv6: true)",
		"agent.yaml:8: tunnel.proxyNetns: required: the node proxy's network namespace",
		"agent.yaml:14: repair.node: required: this node's name",
		`agent.yaml:16: log.level: unknown level "loud" (want debug, info, warn or error)`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	for _, tc := range []struct{ name, yaml, want string }{
		{"unknown nested field", "capture:\n  mode: TPROXY\n  inboundPortz: [80]\n", "agent.yaml:3: capture.inboundPortz: not valid agent YAML: field inboundPortz not found"},
		{"wrong type in a list", "capture:\n  inboundPortsExclude:\n    - 80\n    - http\n", "agent.yaml:4: capture.inboundPortsExclude[1]: not valid agent YAML: cannot unmarshal !!str `http` into int"},
		{"two problems", "interval: soon\nlog:\n  levl: debug\n", "agent.yaml:1: interval: not valid agent YAML: cannot unmarshal !!str `soon` into time.Duration; agent.yaml:3: log.levl: not valid agent YAML: field levl not found"},
		{"syntax", "capture:\n  mode: TPROXY: x\n", "agent.yaml:2: not valid agent YAML: mapping values are not allowed in this context"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("agent.yaml", []byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Parse = %v\nwant it to contain %q", err, tc.want)
			}
		})
	}
}

// TestResolvConf: captureDNS takes the host's resolvers from resolvConf;
// a file that cannot be read or lists none is a problem naming the field.
func TestResolvConf(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "resolv.conf")
	if err := os.WriteFile(good, []byte("search example\nnameserver 127.0.0.53\nnameserver fe80::1%eth0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty.conf")
	if err := os.WriteFile(empty, []byte("search example\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Parse("a.yaml", []byte("capture: {captureDNS: true, resolvConf: "+good+"}\n"))
	if err != nil || !slices.Equal(c.Capture.HostDNSServers, []string{"127.0.0.53", "fe80::1"}) {
		t.Errorf("host resolvers = %v, %v", c.Capture.HostDNSServers, err)
	}
	c, err = Parse("a.yaml", []byte("capture: {captureDNS: true, captureAllDNS: true, resolvConf: "+empty+"}\n"))
	if err != nil || c.Capture.HostDNSServers != nil {
		t.Errorf("captureAllDNS: %v, %v", c.Capture.HostDNSServers, err)
	}
	for _, tc := range []struct{ yaml, want string }{
		{"capture: {captureDNS: true, resolvConf: " + filepath.Join(dir, "missing") + "}\n", "a.yaml:1: capture.resolvConf: reading the host's resolvers"},
		{"capture: {captureDNS: true, resolvConf: " + empty + "}\n", "capture.captureDNS: no resolver to capture"},
		{"capture: {captureDNS: true, resolvConf: none}\n", "capture.captureDNS: no resolver to capture"},
	} {
		_, err := Parse("a.yaml", []byte(tc.yaml))
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.yaml, err, tc.want)
		}
	}
	if _, err := Parse("a.yaml", []byte("capture: {captureDNS: true, resolvConf: none, dnsServers: [10.0.0.2]}\n")); err != nil {
		t.Errorf("dnsServers alone: %v", err)
	}
}

// TestHealthSection: the health reporter's settings are checked at load,
// each problem named under health.
func TestHealthSection(t *testing.T) {
	good := `capture: {disabled: true}
health:
  address: 127.0.0.1:15012
  group: vm
  namespace: bookinfo
  ip: 10.0.0.11
  tls: {caCertificates: /etc/baremesh/root-cert.pem, clientCertificate: /etc/baremesh/cert-chain.pem, privateKey: /etc/baremesh/key.pem}
  probe: {httpGet: {port: 9080, path: /health}, periodSeconds: 5}
`
	c, err := Parse("a.yaml", []byte(good))
	if err != nil || c.Health == nil || c.Health.Probe.FailureThreshold != 3 || c.Health.Probe.HTTPGet.Port != 9080 {
		t.Fatalf("good health section: %+v, %v", c.Health, err)
	}
	for _, bad := range []string{
		"capture: {disabled: true}\nhealth: {address: x:1, namespace: ns, ip: 10.0.0.1, probe: {tcpSocket: {port: 80}}}\n",
		"capture: {disabled: true}\nhealth: {address: x:1, group: g, namespace: ns, ip: 10.0.0.1, probe: {}}\n",
		"capture: {disabled: true}\nhealth: {address: x:1, group: g, namespace: ns, ip: 10.0.0.1, tls: {caCertificates: a}, probe: {tcpSocket: {port: 80}}}\n",
	} {
		if _, err := Parse("a.yaml", []byte(bad)); err == nil || !strings.Contains(err.Error(), "health") {
			t.Errorf("%q: %v, want a problem under health", bad, err)
		}
	}
}
