package daemon

import (
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/baremesh/baremesh/core/testkit"
	"github.com/baremesh/baremesh/internal/daemonconfig"
)

// TestMeshNetworksWatched: the meshNetworks file's gateways reach the
// snapshot at start and after each edit; a bad edit is refused and
// counted, the last good gateways staying; removing the file means one
// network again. A bad file at start is refused naming it.
func TestMeshNetworksWatched(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "conf.d")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(root, "meshnetworks.yaml")
	write := func(body string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("networks:\n  net-k8s:\n    gateways: [{address: 192.0.2.10, port: 15443}]\n")
	d, _ := startDaemon(t, dir)
	gateways := func() int {
		if pc := d.Pipeline().Current(); pc != nil {
			return len(pc.Networks.For("net-k8s"))
		}
		return -1
	}
	testkit.Eventually(t, "the gateway of the file at start", func() bool { return gateways() == 1 })
	write("networks:\n  net-k8s:\n    gateways: [{address: 192.0.2.10, port: 15443}, {address: 192.0.2.11, port: 15443}, {address: gw.example.com, port: 15443}]\n")
	testkit.Eventually(t, "the edited gateways", func() bool { return gateways() == 2 })
	// /debug/networkz shows them, and the one left out with why.
	if _, body := get(t, "http://"+d.HTTPAddr()+"/debug/networkz"); !strings.Contains(body, `"address": "192.0.2.11"`) || !strings.Contains(body, "gw.example.com is not an IP") {
		t.Errorf("/debug/networkz: %s", body)
	}
	write("networks:\n  net-k8s:\n    gateways: [{port: 15443}]\n")
	testkit.Eventually(t, "the bad edit counted as refused", func() bool {
		_, m := get(t, "http://"+d.HTTPAddr()+"/metrics")
		return regexp.MustCompile(`baremesh_mesh_networks_rejects_total [1-9]`).MatchString(m)
	})
	if n := gateways(); n != 2 {
		t.Fatalf("after a refused edit: %d gateways, want the last good 2", n)
	}
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "one network once the file is gone", func() bool {
		pc := d.Pipeline().Current()
		return pc != nil && !pc.Networks.Enabled()
	})

	write("networks: {a: {gateways: [{address: 192.0.2.1, port: 0}]}}\n")
	cfg := daemonconfig.Defaults()
	cfg.ConfigDirs = []string{dir}
	cfg.XDSAddr, cfg.HTTPAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.MeshConfig, cfg.MeshNetworks = filepath.Join(root, "meshconfig.yaml"), file
	if _, err := New(cfg, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), "port 0") {
		t.Errorf("New with a bad meshNetworks: %v, want a refusal naming the file and the port", err)
	}
	conf := filepath.Join(root, "baremesh.yaml")
	if err := os.WriteFile(conf, []byte("configDirs: [conf.d]\nmeshNetworks: meshnetworks.yaml\nstateDir: state\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := CheckConfig([]string{"--config", conf}); err == nil || !strings.Contains(err.Error(), file) {
		t.Errorf("check-config with a bad meshNetworks: %v, want a refusal naming %s", err, file)
	}
}
