package pkgtest

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const testDropIn = `[Service]
# pkgtest: a short watchdog and the daemon's test-only hooks.
WatchdogSec=3s
Environment=BAREMESH_TEST_WATCHDOG_HANG_FILE=/run/baremesh-test/hang
Environment=BAREMESH_TEST_READY_HOLD_FILE=/run/baremesh-test/hold
`

// TestInstallUnderSystemd installs the .debs in a Debian booted under
// systemd-nspawn and checks what systemd and dpkg do with them. The steps
// depend on each other, so they run in order in one container.
func TestInstallUnderSystemd(t *testing.T) {
	needRoot(t, "systemd-nspawn", "nsenter", "debootstrap", "make")
	start := time.Now()
	cur, prev := buildPackages(t, currentVersion(t)), buildPackages(t, prevVersion)
	t.Logf("packages built in %v", time.Since(start).Round(time.Millisecond))
	c := boot(t)
	t.Logf("container booted at %v", time.Since(start).Round(time.Millisecond))
	for _, f := range []string{cur.Deb, cur.AgentDeb, prev.Deb, prev.AgentDeb} {
		c.write("/var/tmp/pkgs/"+filepath.Base(f), string(readFile(t, f)))
	}
	deb := func(p string) string { return "/var/tmp/pkgs/" + filepath.Base(p) }
	const unit = "baremesh.service"

	step := func(name string, f func()) {
		t.Helper()
		s := time.Now()
		f()
		if t.Failed() {
			t.Fatalf("step %q failed", name)
		}
		t.Logf("ok  %-58s %v", name, time.Since(s).Round(time.Millisecond))
	}

	step("install of the previous version on a config it cannot serve: enabled, not started", func() {
		c.write("/etc/baremesh/conf.d/broken.yaml", "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: x}\nspec: {hosts: [\n")
		out := c.must("dpkg", "-i", deb(prev.Deb), deb(prev.AgentDeb))
		if !strings.Contains(out, "enabled but not (re)started") {
			t.Errorf("dpkg -i output does not say why baremesh was not started:\n%s", out)
		}
		if s := c.show(unit); s["ActiveState"] != "inactive" || s["UnitFileState"] != "enabled" {
			t.Errorf("after install on a bad config: %v, want inactive and enabled", s)
		}
		if a := c.show("baremesh-agent.service"); a["ActiveState"] != "active" {
			t.Errorf("baremesh-agent after install: %v", a)
		}
		c.must("getent", "passwd", "baremesh")
	})

	step("fix the config, start: runs as baremesh", func() {
		c.must("rm", "/etc/baremesh/conf.d/broken.yaml")
		c.write("/etc/baremesh/conf.d/web.yaml", seYAML)
		c.must("systemctl", "start", unit)
		s := c.show(unit)
		if s["ActiveState"] != "active" || s["SubState"] != "running" {
			t.Fatalf("after start: %v", s)
		}
		uid := strings.Split(c.must("getent", "passwd", "baremesh"), ":")[2]
		if st := c.must("cat", "/proc/"+s["MainPID"]+"/status"); !strings.Contains(st, "\nUid:\t"+uid+"\t") {
			t.Errorf("baremeshd does not run as baremesh (uid %s):\n%s", uid, st)
		}
		if !strings.HasPrefix(s["StatusText"], "serving 1 service to ") {
			t.Errorf("StatusText = %q", s["StatusText"])
		}
	})

	step("upgrade keeps the edited conffile and restarts", func() {
		c.sh(`sed -i 's/^logLevel: info.*/logLevel: warn   # edited by the admin/' /etc/baremesh/baremesh.yaml`)
		before := c.show(unit)["MainPID"]
		c.must("dpkg", "-i", deb(cur.Deb), deb(cur.AgentDeb))
		if got := c.must("cat", "/etc/baremesh/baremesh.yaml"); !strings.Contains(got, "logLevel: warn   # edited by the admin") {
			t.Errorf("upgrade lost the edited conffile:\n%s", got)
		}
		s := c.show(unit)
		if s["ActiveState"] != "active" || s["MainPID"] == before {
			t.Errorf("after upgrade: %v (MainPID before %s): not restarted", s, before)
		}
		if v := c.must("dpkg-query", "-W", "-f", "${Version}", "baremesh"); v != cur.Version {
			t.Errorf("installed version %q, want %q", v, cur.Version)
		}
	})

	step("systemd-analyze verify is clean", func() {
		out, err := c.exec("systemd-analyze", "verify", "/lib/systemd/system/baremesh.service", "/lib/systemd/system/baremesh-agent.service")
		if err != nil || strings.TrimSpace(out) != "" {
			t.Errorf("systemd-analyze verify: %v\n%s", err, out)
		}
	})

	c.write("/etc/systemd/system/baremesh.service.d/pkgtest.conf", testDropIn)
	c.must("mkdir", "-p", "/run/baremesh-test")
	c.must("systemctl", "daemon-reload")

	step("stop is clean", func() {
		c.must("systemctl", "stop", unit)
		s := c.show(unit)
		if s["ActiveState"] != "inactive" || s["Result"] != "success" {
			t.Errorf("after stop: %v", s)
		}
		if j := c.journal(unit); !strings.Contains(j, "msg=stopped") {
			t.Errorf("no clean stop in the journal:\n%s", lastLines(j, 10))
		}
	})

	step("start reaches active (running) only after READY=1", func() {
		c.must("touch", "/run/baremesh-test/hold")
		c.must("systemctl", "start", "--no-block", unit)
		c.poll("baremeshd to hold READY back", 20*time.Second, func() bool {
			return strings.Contains(c.journal(unit), "READY=1 held back")
		})
		if s := c.show(unit); s["ActiveState"] != "activating" || s["MainPID"] == "0" {
			t.Errorf("before READY: %v, want activating with a main PID", s)
		}
		c.must("rm", "/run/baremesh-test/hold")
		c.poll("active (running) after READY", 20*time.Second, func() bool {
			s := c.show(unit)
			return s["ActiveState"] == "active" && s["SubState"] == "running"
		})
	})

	step("reload applies the log level", func() {
		pid := c.show(unit)["MainPID"]
		c.sh(`sed -i 's/^logLevel: .*/logLevel: debug/' /etc/baremesh/baremesh.yaml`)
		c.must("systemctl", "reload", unit)
		c.poll("log level change in the journal", 20*time.Second, func() bool {
			return strings.Contains(c.journal(unit), `msg="log level changed" component=systemd level=debug`)
		})
		c.poll("active after reload", 10*time.Second, func() bool { return c.show(unit)["ActiveState"] == "active" })
		if s := c.show(unit); s["MainPID"] != pid || strings.Contains(s["StatusText"], "refused") {
			t.Errorf("after reload: %v (MainPID before %s)", s, pid)
		}
	})

	step("a broken config + reload keeps the service up with the old one", func() {
		pid := c.show(unit)["MainPID"]
		c.sh(`cp /etc/baremesh/baremesh.yaml /var/tmp/good.yaml && echo 'xdsAddr: [' >> /etc/baremesh/baremesh.yaml`)
		c.must("systemctl", "reload", unit)
		c.poll("the refusal in STATUS", 20*time.Second, func() bool {
			return strings.Contains(c.show(unit)["StatusText"], "last reload refused")
		})
		s := c.show(unit)
		if s["ActiveState"] != "active" || s["MainPID"] != pid {
			t.Errorf("after a bad reload: %v (MainPID before %s)", s, pid)
		}
		if !strings.Contains(c.journal(unit), "reload refused: keeping the running configuration") {
			t.Error("no refusal reason in the journal")
		}
		t.Logf("StatusText: %s", s["StatusText"])
		c.must("cp", "/var/tmp/good.yaml", "/etc/baremesh/baremesh.yaml")
		c.must("systemctl", "reload", unit)
		c.poll("the refusal to clear", 20*time.Second, func() bool {
			return !strings.Contains(c.show(unit)["StatusText"], "refused")
		})
	})

	step("kill -9 of the main PID is followed by a restart", func() {
		s := c.show(unit)
		c.must("kill", "-9", s["MainPID"])
		c.poll("a new main PID, active", 20*time.Second, func() bool {
			n := c.show(unit)
			return n["ActiveState"] == "active" && n["MainPID"] != s["MainPID"] && n["MainPID"] != "0" && n["NRestarts"] != s["NRestarts"]
		})
	})

	step("the watchdog kills a hung daemon and systemd restarts it", func() {
		s := c.show(unit)
		c.must("touch", "/run/baremesh-test/hang")
		c.poll("a watchdog restart", 30*time.Second, func() bool { return c.show(unit)["NRestarts"] != s["NRestarts"] })
		c.must("rm", "/run/baremesh-test/hang")
		c.poll("active again", 20*time.Second, func() bool {
			n := c.show(unit)
			return n["ActiveState"] == "active" && n["MainPID"] != s["MainPID"]
		})
		if j := c.must("journalctl", "--no-pager", "-o", "cat", "_PID=1"); !strings.Contains(j, "baremesh.service: Watchdog timeout") {
			t.Errorf("no watchdog timeout in systemd's journal:\n%s", lastLines(j, 15))
		}
	})

	c.must("rm", "-r", "/etc/systemd/system/baremesh.service.d")
	c.must("systemctl", "daemon-reload")

	step("remove stops the service and keeps config, state and user", func() {
		c.must("dpkg", "-r", "baremesh")
		if s := c.show(unit); s["ActiveState"] == "active" {
			t.Errorf("after remove: %v", s)
		}
		for _, f := range []string{"/etc/baremesh/baremesh.yaml", "/etc/baremesh/conf.d/web.yaml", "/var/lib/baremesh"} {
			if !c.exists(f) {
				t.Errorf("remove deleted %s", f)
			}
		}
		c.must("getent", "passwd", "baremesh")
		if c.exists("/usr/bin/baremeshd") {
			t.Error("remove left /usr/bin/baremeshd")
		}
	})

	step("purge removes config, state and the user", func() {
		c.must("dpkg", "-P", "baremesh")
		for _, f := range []string{"/etc/baremesh/baremesh.yaml", "/etc/baremesh/meshconfig.yaml", "/etc/baremesh/conf.d", "/var/lib/baremesh"} {
			if c.exists(f) {
				t.Errorf("purge left %s", f)
			}
		}
		if _, err := c.exec("getent", "passwd", "baremesh"); err == nil {
			t.Error("purge left the baremesh user")
		}
		if !c.exists("/etc/baremesh/agent.yaml") {
			t.Error("purging baremesh removed baremesh-agent's agent.yaml")
		}
	})

	step("baremesh-agent applies capture with only its unit's capabilities", func() {
		c.sh(`sed -i 's/disabled: true/disabled: false/' /etc/baremesh/agent.yaml`)
		c.must("systemctl", "restart", "baremesh-agent.service")
		if a := c.show("baremesh-agent.service"); a["ActiveState"] != "active" {
			t.Fatalf("agent with capture: %v\n%s", a, lastLines(c.journal("baremesh-agent.service"), 10))
		}
		if rules := c.must("iptables-save"); !strings.Contains(rules, "-A OUTPUT -j BAREMESH_OUTPUT") {
			t.Errorf("no capture rules after the agent is ready:\n%s", rules)
		}
	})

	step("baremesh-agent: reload applies a new excluded port; a bad file is refused", func() {
		const agentUnit = "baremesh-agent.service"
		pid := c.show(agentUnit)["MainPID"]
		c.sh(`sed -i 's/^  keepOnStop: false.*/&\n  outboundPortsExclude: [5432]/' /etc/baremesh/agent.yaml`)
		c.must("systemctl", "reload", agentUnit)
		c.poll("the new rule", 20*time.Second, func() bool { return strings.Contains(c.must("iptables-save"), "--dport 5432 -j RETURN") })
		c.poll("STATUS after the reload", 20*time.Second, func() bool {
			return strings.Contains(c.show(agentUnit)["StatusText"], "reload applied capture")
		})
		if s := c.show(agentUnit); s["ActiveState"] != "active" || s["MainPID"] != pid {
			t.Errorf("agent after reload: %v (MainPID before %s)", s, pid)
		}
		rules := c.must("iptables-save", "-t", "nat")
		c.sh(`sed -i 's/^  keepOnStop: false.*/&\n  inboundPort: 70000/' /etc/baremesh/agent.yaml`)
		c.must("systemctl", "reload", agentUnit)
		c.poll("the refusal in STATUS", 20*time.Second, func() bool {
			return strings.Contains(c.show(agentUnit)["StatusText"], "agent.yaml:") &&
				strings.Contains(c.show(agentUnit)["StatusText"], "capture.inboundPort: port 70000 out of range")
		})
		if s := c.show(agentUnit); s["ActiveState"] != "active" || s["MainPID"] != pid {
			t.Errorf("agent after a bad reload: %v (MainPID before %s)", s, pid)
		}
		if got := c.must("iptables-save", "-t", "nat"); strings.Contains(got, "70000") || !strings.Contains(got, "--dport 5432 -j RETURN") {
			t.Errorf("rules after a refused reload:\n%s\nbefore:\n%s", got, rules)
		}
		if !strings.Contains(c.journal(agentUnit), "reload refused: keeping the running configuration") {
			t.Error("no refusal in the agent's journal")
		}
	})

	step("baremesh-agent: remove stops it (rules gone), purge removes agent.yaml", func() {
		c.must("dpkg", "-r", "baremesh-agent")
		if a := c.show("baremesh-agent.service"); a["ActiveState"] == "active" {
			t.Errorf("agent after remove: %v", a)
		}
		if rules := c.must("iptables-save"); strings.Contains(rules, "BAREMESH") {
			t.Errorf("capture rules left after remove:\n%s\nagent journal:\n%s", lastLines(rules, 5), lastLines(c.journal("baremesh-agent.service"), 15))
		}
		if !c.exists("/etc/baremesh/agent.yaml") {
			t.Error("remove deleted agent.yaml")
		}
		c.must("dpkg", "-P", "baremesh-agent")
		if c.exists("/etc/baremesh") {
			t.Error("purge of both packages left /etc/baremesh")
		}
	})
	t.Logf("install test done in %v", time.Since(start).Round(time.Millisecond))
}

const seYAML = `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: web, namespace: default}
spec:
  hosts: [web.example.internal]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: DNS
`
