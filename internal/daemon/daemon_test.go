package daemon

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

const seYAML = `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: web, namespace: test}
spec:
  hosts: [web.example.com]
  ports: [{number: PORT, name: http, protocol: HTTP}]
  resolution: DNS
`

// startDaemon runs a real daemon on free ports over dir.
func startDaemon(t *testing.T, dir string) (*Daemon, func()) {
	t.Helper()
	cfg := Defaults()
	cfg.ConfigDirs = []string{dir}
	cfg.XDSAddr, cfg.HTTPAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.MeshConfig = filepath.Join(filepath.Dir(dir), "meshconfig.yaml")
	d, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	stop := func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("daemon did not stop within 10s of cancel")
		}
	}
	t.Cleanup(stop)
	return d, stop
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func pollUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func configzOf(t *testing.T, d *Daemon) configz {
	t.Helper()
	_, body := get(t, "http://"+d.HTTPAddr()+"/debug/configz")
	var cz configz
	if err := json.Unmarshal([]byte(body), &cz); err != nil {
		t.Fatalf("configz: %v: %s", err, body)
	}
	return cz
}

func TestDaemonServesConfigAndFollowsEdits(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "conf.d")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "web.yaml")
	if err := os.WriteFile(path, []byte(strings.Replace(seYAML, "PORT", "80", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	d, _ := startDaemon(t, dir)
	pollUntil(t, "readyz", func() bool { code, _ := get(t, "http://"+d.HTTPAddr()+"/readyz"); return code == 200 })
	if code, _ := get(t, "http://"+d.HTTPAddr()+"/healthz"); code != 200 {
		t.Fatalf("healthz = %d", code)
	}
	cz := configzOf(t, d)
	if len(cz.Resources) != 1 || cz.Resources[0].Source.File != path || cz.Resources[0].Source.Line != 1 {
		t.Fatalf("configz resources = %+v", cz.Resources)
	}
	// An edit shows within a second.
	start := time.Now()
	if err := os.WriteFile(path, []byte(strings.Replace(seYAML, "PORT", "8080", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, "edit in configz", func() bool {
		cz := configzOf(t, d)
		return len(cz.Resources) == 1 && strings.Contains(string(cz.Resources[0].Spec), "8080")
	})
	if took := time.Since(start); took > time.Second {
		t.Errorf("edit took %v to show on configz, want < 1s", took)
	}
	// A bad edit is listed as rejected, with file and line, and the last
	// good resource stays; the daemon keeps serving.
	if err := os.WriteFile(path, []byte(strings.Replace(seYAML, "PORT", "70000", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, "rejected file on configz", func() bool { return len(configzOf(t, d).Rejected) > 0 })
	cz = configzOf(t, d)
	if r := cz.Rejected[0]; r.Origin != path || r.Line != 6 /* the ports line */ || !strings.Contains(r.Error, "ports[0].number") {
		t.Fatalf("rejected = %+v", cz.Rejected)
	}
	if len(cz.Resources) != 1 || !strings.Contains(string(cz.Resources[0].Spec), "8080") {
		t.Fatalf("last good lost: %+v", cz.Resources)
	}
	_, metrics := get(t, "http://"+d.HTTPAddr()+"/metrics")
	if !strings.Contains(metrics, `baremesh_config_files_rejected{source="file:`+dir+`"} 1`) {
		t.Fatalf("metrics lack the rejected-file gauge:\n%s", grep(metrics, "baremesh_config"))
	}
}

func grep(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func TestDaemonWaitsForMissingDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "later")
	d, _ := startDaemon(t, dir)
	pollUntil(t, "readyz with a missing dir", func() bool { code, _ := get(t, "http://"+d.HTTPAddr()+"/readyz"); return code == 200 })
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "web.yaml"), []byte(strings.Replace(seYAML, "PORT", "80", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, "resource from the dir that appeared", func() bool { return len(configzOf(t, d).Resources) == 1 })
}

func TestLoadFlagsAndFile(t *testing.T) {
	dir := t.TempDir()
	// --config-dir without --config: a missing default file is fine.
	cfg, _, err := Load([]string{"--config-dir", dir, "--xds-addr", "127.0.0.1:1"})
	if err != nil || cfg.XDSAddr != "127.0.0.1:1" || cfg.ConfigDirs[0] != dir {
		t.Fatalf("cfg=%+v err=%v", cfg, err)
	}
	// An explicit missing file is an error.
	if _, _, err := Load([]string{"--config", filepath.Join(dir, "nope.yaml")}); err == nil {
		t.Fatal("missing explicit config file accepted")
	}
	file := filepath.Join(dir, "b.yaml")
	for body, want := range map[string]string{
		"configDirs: [c]\nfrob: 1\n":                         "frob",
		"configDirs: [c]\nxdsAddr: nope\n":                   "xdsAddr",
		"configDirs: [c]\nlogLevel: loud\n":                  "logLevel",
		"configDirs: [c]\ndebounce: soon\n":                  "invalid duration",
		"xdsAddr: 127.0.0.1:1\n":                             "configDirs",
		"configDirs: [c]\ndebounce: 1s\ndebounceMax: 10ms\n": "debounce",
	} {
		if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		_, _, err := Load([]string{"--config", file})
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), file) {
			t.Errorf("config %q: err = %v, want it to name %q and the file", body, err, want)
		}
	}
	if err := os.WriteFile(file, []byte("configDirs: [c]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, _, err = Load([]string{"--config", file, "--log-level", "debug"})
	if err != nil || cfg.ConfigDirs[0] != filepath.Join(dir, "c") || cfg.LogLevel != "debug" {
		t.Fatalf("cfg=%+v err=%v", cfg, err)
	}
}

func TestMeshConfigWatchedAndBadEditRefused(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "conf.d")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	mesh := filepath.Join(root, "meshconfig.yaml")
	if err := os.WriteFile(mesh, []byte("trustDomain: first.local\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d, _ := startDaemon(t, dir)
	trust := func() string {
		if pc := d.Pipeline().Current(); pc != nil {
			return pc.Mesh.GetTrustDomain()
		}
		return ""
	}
	pollUntil(t, "initial mesh config", func() bool { return trust() == "first.local" })
	if err := os.WriteFile(mesh, []byte("trustDomain: second.local\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, "edited mesh config in the snapshot", func() bool { return trust() == "second.local" })
	// A bad edit is refused; the last good one stays; a good edit after it
	// applies.
	if err := os.WriteFile(mesh, []byte("trustDomain: [not, a, string]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, "bad mesh config counted as refused", func() bool {
		_, m := get(t, "http://"+d.HTTPAddr()+"/metrics")
		return regexp.MustCompile(`baremesh_mesh_config_rejects_total [1-9]`).MatchString(m)
	})
	if trust() != "second.local" {
		t.Fatalf("after a refused edit trustDomain = %q, want the last good second.local", trust())
	}
	if err := os.WriteFile(mesh, []byte("trustDomain: third.local\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, "good edit after a bad one", func() bool { return trust() == "third.local" })
}
