package pkgtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRPM: metadata and file lists, then an install with the real
// scriptlets into a temporary root (an overlay of the Debian rootfs, so
// /bin/sh and useradd exist; no systemd runs there, so nothing starts).
func TestRPM(t *testing.T) {
	needRoot(t, "rpm", "make", "debootstrap")
	version := currentVersion(t)
	p := buildPackages(t, version)

	for _, tc := range []struct {
		file              string
		info, files, deps []string
	}{
		{p.RPM,
			[]string{"Name        : baremesh", "Version     : " + version, "Architecture: x86_64", "Summary     : Istio-compatible service mesh control plane"},
			[]string{"/usr/bin/baremeshd", "/usr/bin/baremeshctl", "/usr/lib/systemd/system/baremesh.service",
				"/etc/baremesh/baremesh.yaml", "/etc/baremesh/meshconfig.yaml", "/etc/baremesh/conf.d", "/usr/lib/sysusers.d/baremesh.conf",
				"/usr/share/baremesh/grafana/baremesh-control-plane.json", "/usr/share/baremesh/prometheus/baremesh-alerts.yaml"},
			nil},
		{p.AgentRPM,
			[]string{"Name        : baremesh-agent", "Version     : " + version, "Architecture: x86_64"},
			[]string{"/usr/bin/baremesh-agent", "/usr/bin/baremesh-cni", "/usr/lib/systemd/system/baremesh-agent.service", "/etc/baremesh/agent.yaml"},
			[]string{"iptables"}},
	} {
		info := run(t, "rpm", "-qpi", tc.file)
		for _, want := range tc.info {
			if !strings.Contains(info, want) {
				t.Errorf("%s: rpm -qpi lacks %q:\n%s", filepath.Base(tc.file), want, info)
			}
		}
		files := run(t, "rpm", "-qpl", tc.file)
		for _, want := range tc.files {
			if !strings.Contains(files, want+"\n") {
				t.Errorf("%s: rpm -qpl lacks %s:\n%s", filepath.Base(tc.file), want, files)
			}
		}
		configs := run(t, "rpm", "-qpc", tc.file)
		for _, want := range tc.files {
			if strings.HasPrefix(want, "/etc/baremesh/") && strings.HasSuffix(want, ".yaml") && !strings.Contains(configs, want) {
				t.Errorf("%s: %s is not a config file:\n%s", filepath.Base(tc.file), want, configs)
			}
		}
		deps := run(t, "rpm", "-qpR", tc.file)
		for _, want := range tc.deps {
			if !strings.Contains(deps, want) {
				t.Errorf("%s: requires lack %s:\n%s", filepath.Base(tc.file), want, deps)
			}
		}
		t.Logf("rpm -qpi %s:\n%s", filepath.Base(tc.file), info)
	}

	root := overlay(t)
	out := run(t, "rpm", "-i", "--root", root, "--dbpath", "/var/lib/rpm", "--nodeps", p.RPM, p.AgentRPM)
	if strings.Contains(out, "scriptlet failed") {
		t.Errorf("rpm -i: a scriptlet failed:\n%s", out)
	}
	for _, f := range []string{"usr/bin/baremeshd", "usr/bin/baremesh-agent", "etc/baremesh/baremesh.yaml", "etc/baremesh/agent.yaml", "var/lib/baremesh"} {
		if _, err := os.Stat(filepath.Join(root, f)); err != nil {
			t.Errorf("after rpm -i: %v", err)
		}
	}
	if passwd, _ := os.ReadFile(filepath.Join(root, "etc/passwd")); !strings.Contains(string(passwd), "\nbaremesh:") {
		t.Error("the rpm post scriptlet did not create the baremesh user")
	}
	q := run(t, "rpm", "--root", root, "--dbpath", "/var/lib/rpm", "-q", "baremesh", "baremesh-agent")
	if !strings.Contains(q, "baremesh-"+version) || !strings.Contains(q, "baremesh-agent-"+version) {
		t.Errorf("rpm -q in the root: %s", q)
	}
}
