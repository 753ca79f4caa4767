package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/baremesh/baremesh/core/testkit"
	"github.com/baremesh/baremesh/nodeagent/iptables"
	"github.com/baremesh/baremesh/nodeagent/nstest"
)

func TestMain(m *testing.M) { testkit.Main(m.Run) }

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// notifySocket listens like systemd on NOTIFY_SOCKET and collects states.
type notifySocket struct {
	mu     sync.Mutex
	states []string
}

func listenNotify(t *testing.T) *notifySocket {
	t.Helper()
	path := filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("NOTIFY_SOCKET", path)
	n := &notifySocket{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 512)
		for {
			k, err := conn.Read(buf)
			if err != nil {
				return
			}
			n.mu.Lock()
			n.states = append(n.states, string(buf[:k]))
			n.mu.Unlock()
		}
	}()
	t.Cleanup(func() { conn.Close(); <-done })
	return n
}

func (n *notifySocket) has(state string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, s := range n.states {
		if s == state {
			return true
		}
	}
	return false
}

type statusDoc struct {
	State      string `json:"state"`
	Backend    string `json:"backend"`
	Components []struct {
		Name, State, Reason string
	} `json:"components"`
}

func getStatus(t *testing.T, addr string) (statusDoc, int) {
	t.Helper()
	var doc statusDoc
	resp, err := http.Get("http://" + addr + "/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	h, err := http.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	h.Body.Close()
	return doc, h.StatusCode
}

func (d statusDoc) reason(name string) string {
	for _, c := range d.Components {
		if c.Name == name {
			return c.State + ": " + c.Reason
		}
	}
	return ""
}

// fakeProxy writes a script standing in for the proxy (no Envoy binary
// can be had here; the agent supervises any program).
func fakeProxy(t *testing.T) (path, pidFile string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "agent-proxy-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	path, pidFile = filepath.Join(dir, "proxy"), filepath.Join(dir, "pid")
	script := "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'fake-proxy 0.1.0'; exit 0; fi\necho $$ > " + pidFile + "\nexec sleep 600\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path, pidFile
}

func TestAgentEndToEnd(t *testing.T) {
	nstest.RequireRoot(t)
	nstest.RequireBinary(t, "iptables-nft-restore")
	ns := nstest.New(t)
	notify := listenNotify(t)
	t.Setenv("WATCHDOG_USEC", "200000")
	proxyPath, pidFile := fakeProxy(t)
	cfg, err := Parse("test.yaml", []byte(`
capture: {backend: nft, mode: TPROXY, captureDNS: true}
proxy: {path: `+proxyPath+`}
statusAddress: 127.0.0.1:0
interval: 100ms
netns: `+ns.Name+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(context.Background(), discard(), cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- a.Run(ctx) }()
	defer func() { cancel(); <-errc }()

	addr := a.StatusAddr()
	testkit.Eventually(t, "node Ready", func() bool {
		d, code := getStatus(t, addr)
		return d.State == "Ready" && code == http.StatusOK && strings.HasPrefix(d.reason("proxy"), "Ready: running")
	})
	testkit.Eventually(t, "READY=1 and WATCHDOG=1", func() bool { return notify.has("READY=1") && notify.has("WATCHDOG=1") })
	save := func() string { return ns.Run(t, "iptables-nft-save") }
	if !strings.Contains(save(), "-A PREROUTING -j BAREMESH_PREROUTING") {
		t.Fatalf("rules not applied:\n%s", save())
	}
	pidText, _ := os.ReadFile(pidFile)
	status, _ := os.ReadFile("/proc/" + strings.TrimSpace(string(pidText)) + "/status")
	if !strings.Contains(string(status), "\nUid:\t1337\t") {
		t.Errorf("proxy not running as the proxy UID:\n%s", status)
	}

	// A rule deleted by hand comes back within the check interval.
	ns.Run(t, "iptables-nft", "-t", "mangle", "-D", "PREROUTING", "-j", "BAREMESH_PREROUTING")
	deleted := time.Now()
	testkit.Eventually(t, "drift repaired", func() bool { return strings.Contains(save(), "-A PREROUTING -j BAREMESH_PREROUTING") })
	t.Logf("drift repaired %v after the rule was deleted (interval 100ms)", time.Since(deleted).Round(time.Millisecond))
	testkit.Eventually(t, "repair reported", func() bool {
		d, _ := getStatus(t, addr)
		return strings.Contains(d.reason("capture"), "repaired drift") || strings.Contains(d.reason("capture"), "rules in place")
	})

	// Stop: STOPPING=1, proxy stopped, every rule removed.
	cancel()
	if err := <-errc; err != nil {
		t.Errorf("Run: %v", err)
	}
	errc <- nil
	if !notify.has("STOPPING=1") {
		t.Error("no STOPPING=1")
	}
	if s := save(); strings.Contains(s, "BAREMESH") {
		t.Errorf("rules left after stop:\n%s", s)
	}
	if out := ns.Run(t, "ip", "rule"); strings.Contains(out, "0x539") {
		t.Errorf("policy routing left after stop:\n%s", out)
	}
	var pid int
	if _, err := fmt.Sscan(strings.TrimSpace(string(pidText)), &pid); err == nil && syscall.Kill(pid, 0) == nil {
		t.Errorf("proxy %d still running after stop", pid)
	}
}

func TestUninstallRemovesEveryTrace(t *testing.T) {
	nstest.RequireRoot(t)
	nstest.RequireBinary(t, "iptables-legacy-restore")
	ns := nstest.New(t)
	cfg, err := Parse("test.yaml", []byte("capture: {backend: legacy, mode: TPROXY, keepOnStop: true}\nstatusAddress: 127.0.0.1:0\ninterval: 50ms\nnetns: "+ns.Name+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(context.Background(), discard(), cfg, Options{Notify: func(string) {}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- a.Run(ctx) }()
	testkit.Eventually(t, "rules applied", func() bool { return strings.Contains(ns.Run(t, "iptables-legacy-save"), "BAREMESH_TPROXY") })
	cancel()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(ns.Run(t, "iptables-legacy-save"), "BAREMESH_TPROXY") {
		t.Fatal("keepOnStop: rules removed at stop")
	}
	var dry bytes.Buffer
	if err := Uninstall(context.Background(), discard(), cfg, &dry); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(dry.String(), "-X BAREMESH_TPROXY") || !strings.Contains(ns.Run(t, "iptables-legacy-save"), "BAREMESH") {
		t.Errorf("dry-run uninstall: printed %q or changed rules", dry.String())
	}
	if err := Uninstall(context.Background(), discard(), cfg, nil); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range [][]string{{"iptables-legacy-save"}, {"ip6tables-legacy-save"}, {"iptables-nft-save"}} {
		if out := ns.Run(t, cmd...); strings.Contains(out, "BAREMESH") {
			t.Errorf("%s after uninstall:\n%s", cmd[0], out)
		}
	}
	for _, fam := range []string{"-4", "-6"} {
		if out := ns.Run(t, "ip", fam, "rule"); strings.Contains(out, "0x539") {
			t.Errorf("ip %s rule after uninstall:\n%s", fam, out)
		}
		if out, _ := ns.Try("ip", fam, "route", "show", "table", "133"); strings.TrimSpace(out) != "" {
			t.Errorf("ip %s route table 133 after uninstall:\n%s", fam, out)
		}
	}
}

func TestNewFailsClearly(t *testing.T) {
	cfg, _ := Parse("test.yaml", nil)
	t.Setenv("PATH", t.TempDir())
	_, err := New(context.Background(), discard(), cfg, Options{})
	if os.Geteuid() == 0 {
		if !errors.Is(err, iptables.ErrIptablesMissing) {
			t.Errorf("New without iptables = %v", err)
		}
	} else if !errors.Is(err, iptables.ErrNotRoot) {
		t.Errorf("New as non-root = %v", err)
	}
}
