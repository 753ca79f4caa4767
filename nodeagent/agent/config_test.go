package agent

import (
	"errors"
	"os"
	"path/filepath"
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
		{"port not a number", "capture:\n  inboundPort: http\n", "line 2"},
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
