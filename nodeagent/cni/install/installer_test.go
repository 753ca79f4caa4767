package install

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/containernetworking/cni/libcni"

	"github.com/baremesh/baremesh/core/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m.Run) }

// A conflist as a real main CNI (the bridge + portmap chain of the
// containernetworking reference setup) writes it.
const mainConflist = `{
  "cniVersion": "1.0.0",
  "name": "k8s-pod-network",
  "plugins": [
    {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.244.1.0/24"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`

const mainConf = `{"cniVersion": "0.4.0", "name": "podnet", "type": "bridge", "bridge": "cni0",
 "ipam": {"type": "host-local", "subnet": "10.244.2.0/24"}}
`

type fixture struct {
	conf, bin, src string
	in             *Installer
}

func newFixture(t *testing.T, files map[string]string) *fixture {
	t.Helper()
	f := &fixture{conf: t.TempDir(), bin: t.TempDir(), src: t.TempDir()}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(f.conf, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	plugin := filepath.Join(f.src, "baremesh-cni")
	if err := os.WriteFile(plugin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	f.in = New(slog.New(slog.NewTextHandler(io.Discard, nil)), Options{
		BinDir: f.bin, ConfDir: f.conf, Binaries: []string{plugin}, Kubeconfig: []byte("apiVersion: v1\nkind: Config\n"),
		Plugin: map[string]any{"logLevel": "warn", "kubernetes": map[string]any{"excludeNamespaces": []any{"kube-system"}}},
	})
	return f
}

// chain loads a file with libcni, as a runtime would, and returns the
// plugin types in order.
func chain(t *testing.T, path string) []string {
	t.Helper()
	list, err := libcni.ConfListFromFile(path)
	if err != nil {
		t.Fatalf("libcni cannot load %s: %v", path, err)
	}
	var types []string
	for _, p := range list.Plugins {
		types = append(types, p.Network.Type)
	}
	return types
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestInstallConflistAndUninstall(t *testing.T) {
	f := newFixture(t, map[string]string{"10-main.conflist": mainConflist, "99-other.conflist": mainConflist, "05-junk.conf": "{not json"})
	if err := f.in.Install(); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(f.conf, "10-main.conflist")
	if got := chain(t, p); !equal(got, []string{"bridge", "portmap", "baremesh-cni"}) {
		t.Fatalf("chain %v", got)
	}
	if got := chain(t, filepath.Join(f.conf, "99-other.conflist")); len(got) != 2 {
		t.Errorf("second file changed: %v", got)
	}
	if !f.in.Ready() || f.in.ConfFile() != p {
		t.Errorf("ready %v conf %q", f.in.Ready(), f.in.ConfFile())
	}
	st, err := os.Stat(filepath.Join(f.conf, KubeconfigName))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("kubeconfig: %v %v", st, err)
	}
	if st, err := os.Stat(filepath.Join(f.bin, "baremesh-cni")); err != nil || st.Mode().Perm() != 0o755 {
		t.Errorf("binary: %v %v", st, err)
	}
	list, _ := libcni.ConfListFromFile(p)
	ours := string(list.Plugins[2].Bytes)
	for _, want := range []string{`"kubeconfig":"` + filepath.Join(f.conf, KubeconfigName) + `"`, `"excludeNamespaces":["kube-system"]`} {
		if !strings.Contains(ours, want) {
			t.Errorf("our entry %s lacks %s", ours, want)
		}
	}
	before, _ := os.ReadFile(p)
	if err := f.in.Install(); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.ReadFile(p); string(after) != string(before) {
		t.Errorf("second install changed the file:\n%s\n%s", before, after)
	}
	if err := f.in.Uninstall(); err != nil {
		t.Fatal(err)
	}
	if got := chain(t, p); !equal(got, []string{"bridge", "portmap"}) {
		t.Errorf("after uninstall: %v", got)
	}
	for _, gone := range []string{filepath.Join(f.conf, KubeconfigName), filepath.Join(f.bin, "baremesh-cni")} {
		if _, err := os.Stat(gone); !os.IsNotExist(err) {
			t.Errorf("%s still there (%v)", gone, err)
		}
	}
}

func TestInstallConvertsConf(t *testing.T) {
	f := newFixture(t, map[string]string{"10-bridge.conf": mainConf})
	if err := f.in.Install(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(f.conf, "10-bridge.conf")); !os.IsNotExist(err) {
		t.Errorf(".conf not replaced: %v", err)
	}
	p := filepath.Join(f.conf, "10-bridge.conflist")
	if got := chain(t, p); !equal(got, []string{"bridge", "baremesh-cni"}) {
		t.Fatalf("chain %v", got)
	}
	list, _ := libcni.ConfListFromFile(p)
	if list.Name != "podnet" || list.CNIVersion != "0.4.0" {
		t.Errorf("name %q version %q", list.Name, list.CNIVersion)
	}
}

func TestChooseFileByName(t *testing.T) {
	f := newFixture(t, map[string]string{"10-main.conflist": mainConflist, "20-pick.conflist": mainConflist})
	f.in.opts.ConfName = "20-pick.conflist"
	if err := f.in.Install(); err != nil {
		t.Fatal(err)
	}
	if got := chain(t, filepath.Join(f.conf, "20-pick.conflist")); len(got) != 3 {
		t.Errorf("named file not chained: %v", got)
	}
	if got := chain(t, filepath.Join(f.conf, "10-main.conflist")); len(got) != 2 {
		t.Errorf("other file chained: %v", got)
	}
}

// TestRunReinserts: the main CNI writes its config late, then rewrites
// it without us; Run puts us back each time.
func TestRunReinserts(t *testing.T) {
	f := newFixture(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	var runErr error
	go func() { defer wg.Done(); runErr = f.in.Run(ctx) }()
	defer func() {
		cancel()
		wg.Wait()
		if runErr != nil {
			t.Error(runErr)
		}
	}()
	p := filepath.Join(f.conf, "10-main.conflist")
	waitChained := func(what string) {
		t.Helper()
		testkit.Eventually(t, what+": baremesh-cni chained", func() bool {
			data, err := os.ReadFile(p)
			if err != nil || !strings.Contains(string(data), PluginType) || !f.in.Ready() {
				return false
			}
			_, err = libcni.ConfListFromBytes(data)
			return err == nil
		})
	}
	if f.in.Ready() {
		t.Error("ready before any CNI config exists")
	}
	for _, what := range []string{"main CNI writes its config", "main CNI rewrites it"} {
		tmp := filepath.Join(f.conf, ".main.tmp")
		if err := os.WriteFile(tmp, []byte(mainConflist), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, p); err != nil {
			t.Fatal(err)
		}
		waitChained(what)
	}
}

// TestRunReadyFile: with a ReadyFile, Run keeps it present while the
// plugin is chained, not before the main CNI wrote its config, and
// removes it when it returns.
func TestRunReadyFile(t *testing.T) {
	f := newFixture(t, nil)
	ready := filepath.Join(t.TempDir(), "ready")
	f.in.opts.ReadyFile = ready
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- f.in.Run(ctx) }()
	exists := func() bool { _, err := os.Stat(ready); return err == nil }
	if exists() {
		t.Error("ready file before any CNI config exists")
	}
	tmp := filepath.Join(f.conf, ".main.tmp") // renamed in whole: Run never reads it half-written
	if err := os.WriteFile(tmp, []byte(mainConflist), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(f.conf, "10-main.conflist")); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "the ready file once chained", exists)
	cancel()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if exists() {
		t.Error("ready file left after Run returned")
	}
}
