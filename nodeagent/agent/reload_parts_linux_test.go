package agent

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/baremesh/baremesh/core/testkit"
	"github.com/baremesh/baremesh/nodeagent/nstest"
)

// TestReloadStartsAndStopsComponents: sections added by a reload start
// (capture rules, the proxy, the tunnel, the repair controller) and
// sections removed stop, leaving nothing behind; the agent's status
// follows.
func TestReloadStartsAndStopsComponents(t *testing.T) {
	nstest.RequireRoot(t)
	nstest.RequireBinary(t, "iptables-nft-restore")
	capNS, node, proxyNS := nstest.New(t), nstest.New(t), nstest.New(t)
	if out, err := exec.Command("ip", "link", "add", "ztun0", "netns", node.Name, "type", "veth", "peer", "name", "eth0", "netns", proxyNS.Name).CombinedOutput(); err != nil {
		t.Fatalf("veth: %v: %s", err, out)
	}
	node.Run(t, "ip", "addr", "add", "10.200.2.1/24", "dev", "ztun0")
	node.Run(t, "ip", "link", "set", "ztun0", "up")
	proxyNS.Run(t, "ip", "addr", "add", "10.200.2.2/24", "dev", "eth0")
	proxyNS.Run(t, "ip", "link", "set", "eth0", "up")
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "http://127.0.0.1:1"}}]
users: [{name: u, user: {}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600); err != nil {
		t.Fatal(err)
	}
	proxyPath, pidFile := fakeProxy(t)
	minimal := "capture: {disabled: true, backend: nft}\nstatusAddress: 127.0.0.1:0\ninterval: 1h\nnetns: " + capNS.Name + "\n"
	full := "capture: {backend: nft}\nstatusAddress: 127.0.0.1:0\ninterval: 1h\nnetns: " + capNS.Name + `
proxy: {path: ` + proxyPath + `}
tunnel: {enabled: true, kind: vxlan, backend: nft, nodeUnderlay: 10.200.2.1, proxyUnderlay: 10.200.2.2,
  nodeNetns: ` + node.Name + `, proxyNetns: ` + proxyNS.Name + `}
repair: {enabled: true, node: node-1, kubeconfig: ` + kubeconfig + "}\n"
	r := startReloadAgent(t, minimal)
	names := func() []string {
		d, _ := getStatus(t, r.addr)
		var out []string
		for _, c := range d.Components {
			out = append(out, c.Name)
		}
		return out
	}
	if got := names(); !slices.Equal(got, []string{"controlplane", "config"}) {
		t.Fatalf("components at start: %v", got)
	}
	passes := r.a.status().Passes

	plan := r.mustReload(full)
	if !slices.Equal(plan.Apply, []string{"capture", "proxy", "tunnel", "repair"}) {
		t.Errorf("applied %v", plan.Apply)
	}
	if got := names(); !slices.Equal(got, []string{"capture", "proxy", "tunnel", "repair", "controlplane", "config"}) {
		t.Errorf("components after adding sections: %v", got)
	}
	if p := r.a.status().Passes; p != passes+1 {
		t.Errorf("passes %d -> %d across a reload that changed the components", passes, p)
	}
	d, _ := getStatus(t, r.addr)
	if d.State != "Ready" || !strings.HasPrefix(d.reason("proxy"), "Ready: started") || !strings.HasPrefix(d.reason("repair"), "Ready: running") {
		t.Errorf("status after adding sections: %+v", d)
	}
	if !strings.Contains(capNS.Run(t, "iptables-nft-save"), "-A OUTPUT -j BAREMESH_OUTPUT") {
		t.Error("capture enabled by the reload: no rules")
	}
	if _, err := node.Try("ip", "link", "show", "bmtun0"); err != nil {
		t.Errorf("tunnel enabled by the reload: no device: %v", err)
	}
	var pid string
	testkit.Eventually(t, "proxy pid file", func() bool { b, _ := os.ReadFile(pidFile); pid = strings.TrimSpace(string(b)); return pid != "" })
	if _, err := os.Stat("/proc/" + pid); err != nil {
		t.Fatalf("proxy not running: %v", err)
	}

	// The proxy's arguments change: it is restarted; the rest is kept.
	restores := r.runner.restores.Load()
	plan = r.mustReload(strings.Replace(full, "proxy: {path: "+proxyPath+"}", "proxy: {path: "+proxyPath+", args: [-x]}", 1))
	if !slices.Equal(plan.Apply, []string{"proxy"}) || r.runner.restores.Load() != restores {
		t.Errorf("proxy args change: applied %v, %d restores", plan.Apply, r.runner.restores.Load()-restores)
	}
	if _, err := os.Stat("/proc/" + pid); err == nil {
		t.Errorf("proxy %s still running after its args changed", pid)
	}
	if d, _ := getStatus(t, r.addr); !strings.HasPrefix(d.reason("proxy"), "Ready: started") {
		t.Errorf("proxy after its args changed: %q", d.reason("proxy"))
	}
	testkit.Eventually(t, "new proxy pid", func() bool { b, _ := os.ReadFile(pidFile); return strings.TrimSpace(string(b)) != pid })
	b, _ := os.ReadFile(pidFile)
	pid = strings.TrimSpace(string(b))

	plan = r.mustReload(minimal)
	if !slices.Equal(plan.Apply, []string{"capture", "proxy", "tunnel", "repair"}) {
		t.Errorf("applied %v", plan.Apply)
	}
	if got := names(); !slices.Equal(got, []string{"controlplane", "config"}) {
		t.Errorf("components after removing sections: %v", got)
	}
	if s := capNS.Run(t, "iptables-nft-save"); strings.Contains(s, "BAREMESH") {
		t.Errorf("capture disabled by the reload: rules left:\n%s", s)
	}
	if _, err := node.Try("ip", "link", "show", "bmtun0"); err == nil {
		t.Error("tunnel disabled by the reload: device left")
	}
	if _, err := os.Stat("/proc/" + pid); err == nil {
		t.Errorf("proxy %s still running after its section was removed", pid)
	}
}

// TestReloadRestartOnlySettings: settings the agent cannot change while
// running are reported as needing a restart (log and /status) and keep
// their running values; the rest of the file is applied.
func TestReloadRestartOnlySettings(t *testing.T) {
	nstest.RequireRoot(t)
	nstest.RequireBinary(t, "iptables-nft-restore")
	ns := nstest.New(t)
	base := "capture: {backend: nft}\nstatusAddress: 127.0.0.1:0\ninterval: 1h\nnetns: " + ns.Name + "\n"
	r := startReloadAgent(t, base)
	changed := strings.Replace(base, "statusAddress: 127.0.0.1:0", "statusAddress: 127.0.0.1:1\nlog: {format: json, level: warn}", 1)
	changed = strings.Replace(changed, "{backend: nft}", "{backend: legacy, chainPrefix: OTHER, outboundPortsExclude: [5432]}", 1)
	plan := r.mustReload(changed)
	if !slices.Equal(plan.Restart, []string{"statusAddress", "log.format", "capture.backend", "capture.chainPrefix"}) ||
		!slices.Equal(plan.Apply, []string{"capture", "log.level"}) {
		t.Errorf("plan %+v", plan)
	}
	d, _ := getStatus(t, r.addr) // still served on the old address
	if d.State != "Warning" || d.reason("config") == "" ||
		!strings.Contains(d.reason("config"), "restart needed for statusAddress, log.format, capture.backend, capture.chainPrefix") {
		t.Errorf("status: %+v", d)
	}
	if !strings.Contains(r.logs.String(), "these changes need a restart") {
		t.Errorf("log:\n%s", r.logs.String())
	}
	save := ns.Run(t, "iptables-nft-save")
	if !strings.Contains(save, "BAREMESH_OUTPUT") || !strings.Contains(save, "--dport 5432 -j RETURN") || strings.Contains(save, "OTHER_") {
		t.Errorf("want the new exclusion in the running chains of the running backend:\n%s", save)
	}
	if r.level.Level() != slog.LevelWarn {
		t.Errorf("level %v", r.level.Level())
	}
	// Changed back: nothing waits for a restart any more.
	plan = r.mustReload(base)
	if len(plan.Restart) != 0 {
		t.Errorf("changed back: restart %v", plan.Restart)
	}
	if d, _ := getStatus(t, r.addr); d.State != "Ready" {
		t.Errorf("changed back: %+v", d)
	}
	r.stop()
	if _, err := r.a.Reload(context.Background()); !errors.Is(err, ErrNotRunning) {
		t.Errorf("Reload after Run: %v", err)
	}
}

// TestReloadsChannel: a value on Options.Reloads (baremesh-agent's
// SIGHUP) reloads the config file as Reload does.
func TestReloadsChannel(t *testing.T) {
	nstest.RequireRoot(t)
	nstest.RequireBinary(t, "iptables-nft-restore")
	ns := nstest.New(t)
	base := "capture: {backend: nft}\nstatusAddress: 127.0.0.1:0\ninterval: 1h\nnetns: " + ns.Name + "\n"
	r := startReloadAgent(t, base)
	n := r.noticeCount()
	r.write(base + "log: {level: warn}\n")
	r.hup <- syscall.SIGHUP
	testkit.Eventually(t, "the new log level", func() bool { return r.level.Level() == slog.LevelWarn })
	if l := r.logs.String(); !strings.Contains(l, `msg="reloading the config" signal=hangup`) {
		t.Errorf("log:\n%s", l)
	}
	testkit.Eventually(t, "RELOADING=1, then READY=1, told to systemd", func() bool {
		got := strings.Join(r.noticesSince(n), "|")
		return strings.HasPrefix(got, "RELOADING=1") && strings.Contains(got, "READY=1")
	})
}
