package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestTunnelMark: the mark comes from agent.yaml's tunnel: section or a
// tunnel.yaml, the tunnel's default when unset; an unreadable file is an
// error.
func TestTunnelMark(t *testing.T) {
	for _, tc := range []struct {
		name, config string
		want         uint32
	}{
		{"agent.yaml", "capture: {disabled: true}\ntunnel:\n  enabled: true\n  kind: vxlan\n  mark: 0x200\n", 0x200},
		{"tunnel.yaml", "kind: vxlan\nmark: 0x800\nproxyNetns: ztunnel\n", 0x800},
		{"default mark", "tunnel: {enabled: true}\n", 0x100},
	} {
		if got, err := TunnelMark(writeFile(t, tc.config)); err != nil || got != tc.want {
			t.Errorf("%s: mark %#x %v, want %#x", tc.name, got, err, tc.want)
		}
	}
	if _, err := TunnelMark(filepath.Join(t.TempDir(), "missing.yaml")); err == nil {
		t.Error("missing file: no error")
	}
}

// TestLoadTunnelFile: a tunnel.yaml is read strictly, checked with the
// tunnel's own rules (errors name the file and field) and its interval
// defaults to 10 s.
func TestLoadTunnelFile(t *testing.T) {
	tf, err := LoadTunnelFile(writeFile(t, "kind: vxlan\nnodeUnderlay: 10.0.0.1\nproxyUnderlay: 10.0.0.2\nproxyNetns: ztunnel\n"))
	if err != nil || tf.Kind != "vxlan" || tf.ProxyNetNS != "ztunnel" || tf.Interval != 10*time.Second {
		t.Errorf("good file: %+v %v", tf, err)
	}
	for _, tc := range []struct{ config, want string }{
		{"kind: gre\n", "tunnel: kind"},
		{"kind: vxlan\nenabled: true\n", "field enabled not found"},
		{"kind: [\n", "not valid tunnel YAML"},
	} {
		path := writeFile(t, tc.config)
		if _, err := LoadTunnelFile(path); err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
			t.Errorf("%q: %v, want an error naming %s and %q", tc.config, err, path, tc.want)
		}
	}
}
