package daemon

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baremesh/baremesh/core/cluster"
	"github.com/baremesh/baremesh/core/testkit"
	"github.com/baremesh/baremesh/internal/daemonconfig"
)

// TestClusterConfig reads a cluster: block from a real file and starts
// two replicas from it that find each other with the encrypted key.
func TestClusterConfig(t *testing.T) {
	dir := t.TempDir()
	key := base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
	if err := os.WriteFile(filepath.Join(dir, "gossip.key"), []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cfgA, err := daemonconfig.ReadFile(write("a.yaml", "configDirs: [conf]\ncluster: {name: a, bind: '127.0.0.1:0', keyFile: gossip.key}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfgA.Validate(); err != nil {
		t.Fatal(err)
	}
	oa, err := clusterOptions(cfgA, time.Second, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if len(oa.SecretKey) != 32 || oa.Name != "a" {
		t.Fatalf("options %+v", oa)
	}
	a, err := cluster.New(oa)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Shutdown(false)
	cfgB, err := daemonconfig.ReadFile(write("b.yaml", "configDirs: [conf]\ncluster: {name: b, bind: '127.0.0.1:0', keyFile: gossip.key, seeds: ['"+a.Addr()+"']}\n"))
	if err != nil {
		t.Fatal(err)
	}
	ob, err := clusterOptions(cfgB, time.Second, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	b, err := cluster.New(ob)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Shutdown(true)
	testkit.Eventually(t, "a and b to form a cluster", func() bool { return a.NumMembers() == 2 && b.NumMembers() == 2 })
}

func TestClusterConfigErrors(t *testing.T) {
	dir := t.TempDir()
	keyFile := func(name, body string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := base64.StdEncoding.EncodeToString(make([]byte, 16))
	for _, tc := range []struct {
		name string
		c    daemonconfig.ClusterConfig
		want string
	}{
		{"seeds without bind", daemonconfig.ClusterConfig{Seeds: []string{"10.0.0.1:7946"}}, "cluster: bind is required"},
		{"bad bind", daemonconfig.ClusterConfig{Bind: "7946"}, "cluster.bind"},
		{"bad seed", daemonconfig.ClusterConfig{Bind: ":7946", Seeds: []string{"x"}}, "cluster.seeds[0]"},
		{"missing key", daemonconfig.ClusterConfig{Bind: ":7946", KeyFile: filepath.Join(dir, "none")}, "cluster.keyFile"},
		{"short key", daemonconfig.ClusterConfig{Bind: ":7946", KeyFile: keyFile("short", base64.StdEncoding.EncodeToString([]byte("abc")), 0o600)}, "key is 3 bytes"},
		{"not base64", daemonconfig.ClusterConfig{Bind: ":7946", KeyFile: keyFile("junk", "!!!", 0o600)}, "not base64"},
		{"readable by others", daemonconfig.ClusterConfig{Bind: ":7946", KeyFile: keyFile("open", good, 0o644)}, "chmod 600"},
	} {
		cfg := daemonconfig.Defaults()
		cfg.ConfigDirs = []string{dir}
		cfg.Cluster = tc.c
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
	cfg := daemonconfig.Defaults()
	cfg.ConfigDirs = []string{dir}
	if err := cfg.Validate(); err != nil {
		t.Errorf("no cluster block: %v", err)
	}
}

// runClustered runs a real daemon over an empty config dir with a
// cluster: block; stop stops it (once).
func runClustered(t *testing.T, cc daemonconfig.ClusterConfig) (d *Daemon, stop func()) {
	t.Helper()
	dir := t.TempDir()
	cfg := daemonconfig.Defaults()
	cfg.ConfigDirs = []string{dir}
	cfg.XDSAddr, cfg.HTTPAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.MeshConfig = filepath.Join(dir, "no-meshconfig.yaml")
	cfg.Cluster = cc
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	d, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return d, stop
}

func clusterzOf(t *testing.T, d *Daemon) cluster.Status {
	t.Helper()
	code, body := get(t, "http://"+d.HTTPAddr()+"/debug/clusterz")
	var s cluster.Status
	if code != http.StatusOK || json.Unmarshal([]byte(body), &s) != nil {
		return cluster.Status{}
	}
	return s
}

// TestDaemonsFormACluster: three baremeshd with cluster: blocks, each on
// its own ports, find each other through one seed; /debug/clusterz and
// /metrics show it, and a clean stop leaves the cluster.
func TestDaemonsFormACluster(t *testing.T) {
	a, _ := runClustered(t, daemonconfig.ClusterConfig{Name: "cp-a", Bind: "127.0.0.1:0"})
	var addr string
	testkit.Eventually(t, "cp-a's /debug/clusterz", func() bool { addr = clusterzOf(t, a).Addr; return addr != "" })
	b, stopB := runClustered(t, daemonconfig.ClusterConfig{Name: "cp-b", Bind: "127.0.0.1:0", Seeds: []string{addr}})
	c, _ := runClustered(t, daemonconfig.ClusterConfig{Name: "cp-c", Bind: "127.0.0.1:0", Seeds: []string{addr}})
	for _, d := range []*Daemon{a, b, c} {
		testkit.Eventually(t, "three members on "+d.HTTPAddr(), func() bool { return len(clusterzOf(t, d).Members) == 3 })
	}
	if _, m := get(t, "http://"+a.HTTPAddr()+"/metrics"); !strings.Contains(m, "baremesh_cluster_members 3") {
		t.Errorf("metrics lack baremesh_cluster_members 3")
	}
	stopB()
	for _, d := range []*Daemon{a, c} {
		testkit.Eventually(t, "two members after cp-b left, on "+d.HTTPAddr(), func() bool { return len(clusterzOf(t, d).Members) == 2 })
	}
}
