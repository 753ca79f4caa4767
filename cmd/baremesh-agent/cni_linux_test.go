package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCNIInstallTakesTheTunnelMark: `cni install -tunnel-config` writes
// the tunnel's mark (agent.TunnelMark: agent.yaml's tunnel: section or a
// tunnel.yaml, tested there) as the plugin's ambientMark; an unreadable
// file is an error naming the flag.
func TestCNIInstallTakesTheTunnelMark(t *testing.T) {
	for _, tc := range []struct {
		name, config string
		want         float64
	}{
		{"agent.yaml", "capture: {disabled: true}\ntunnel:\n  enabled: true\n  kind: vxlan\n  mark: 0x200\n", 0x200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			bin, conf := filepath.Join(dir, "bin"), filepath.Join(dir, "net.d")
			for _, d := range []string{bin, conf} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			plugin, kc, cfg := filepath.Join(dir, "baremesh-cni"), filepath.Join(dir, "kubeconfig"), filepath.Join(dir, "cfg.yaml")
			list := filepath.Join(conf, "10-bridge.conflist")
			for path, content := range map[string]string{
				plugin: "#!/bin/sh\n", kc: "apiVersion: v1\nkind: Config\n", cfg: tc.config,
				list: `{"cniVersion":"1.0.0","name":"k8s","plugins":[{"type":"bridge","bridge":"cni0"}]}`,
			} {
				if err := os.WriteFile(path, []byte(content), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			code, out, stderr := runMain(t, "cni", "install", "-bin-dir", bin, "-conf-dir", conf, "-plugin", plugin,
				"-kubeconfig", kc, "-ambient", "-tunnel-config", cfg)
			if code != 0 {
				t.Fatalf("cni install: exit %d, %s %s", code, out, stderr)
			}
			data, err := os.ReadFile(list)
			if err != nil {
				t.Fatal(err)
			}
			var doc struct {
				Plugins []map[string]any `json:"plugins"`
			}
			if err := json.Unmarshal(data, &doc); err != nil {
				t.Fatal(err)
			}
			last := doc.Plugins[len(doc.Plugins)-1]
			if last["type"] != "baremesh-cni" || last["ambientMark"] != tc.want {
				t.Errorf("chained plugin %v, want ambientMark %#x", last, int(tc.want))
			}
		})
	}
	code, _, stderr := runMain(t, "cni", "install", "-conf-dir", t.TempDir(), "-kubeconfig", writeConfig(t, ""),
		"-tunnel-config", filepath.Join(t.TempDir(), "missing.yaml"))
	if code != 1 || !strings.Contains(stderr, "-tunnel-config") {
		t.Errorf("missing tunnel config: exit %d, %s", code, stderr)
	}
}
