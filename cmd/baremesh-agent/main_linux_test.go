package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/baremesh/baremesh/core/testkit"
	"github.com/baremesh/baremesh/nodeagent/nstest"
)

const mainEnv = "BAREMESH_AGENT_TEST_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(mainEnv) != "" { // re-executed as another user: be the command
		os.Exit(mainProcess(os.Args[1:], os.Stdout, os.Stderr))
	}
	testkit.Main(func() int {
		code := m.Run()
		nstest.Cleanup()
		return code
	})
}

func runMain(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, &out, &errOut, nil)
	return code, out.String(), errOut.String()
}

func writeConfig(t *testing.T, content string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "agent-config-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	_ = os.Chmod(dir, 0o755)
	path := filepath.Join(dir, "agent.yaml")
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestVersion(t *testing.T) {
	if code, out, _ := runMain(t, "version"); code != 0 || strings.TrimSpace(out) == "" {
		t.Errorf("version: %d %q", code, out)
	}
}

func TestBadConfigFile(t *testing.T) {
	code, _, stderr := runMain(t, "-config", writeConfig(t, "capture: {mode: [\n"))
	if code != 1 || !strings.Contains(stderr, "not valid agent YAML") {
		t.Errorf("not YAML: exit %d, %q", code, stderr)
	}
	code, _, stderr = runMain(t, "-config", writeConfig(t, "capture:\n  outboundIPRanges: [300.1.1.1/8]\n"))
	if code != 1 || !strings.Contains(stderr, "outboundIPRanges[0]: invalid CIDR") {
		t.Errorf("bad CIDR: exit %d, %q", code, stderr)
	}
	code, _, stderr = runMain(t, "-config", "/nonexistent/agent.yaml")
	if code != 1 || !strings.Contains(stderr, "/nonexistent/agent.yaml") {
		t.Errorf("missing file: exit %d, %q", code, stderr)
	}
}

func TestIptablesMissing(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping: as non-root the not-root error comes first")
	}
	cfg := writeConfig(t, "statusAddress: 127.0.0.1:0\n")
	t.Setenv("PATH", t.TempDir())
	code, _, stderr := runMain(t, "-config", cfg)
	if code != 1 || !strings.Contains(stderr, "iptables not installed") || !strings.Contains(stderr, "apt-get install iptables") {
		t.Errorf("exit %d, %q", code, stderr)
	}
}

// TestNotRoot runs the command as user nobody in a child process.
func TestNotRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		code, _, stderr := runMain(t, "-config", writeConfig(t, ""))
		if code != 1 || !strings.Contains(stderr, "not running as root") {
			t.Errorf("exit %d, %q", code, stderr)
		}
		return
	}
	nstest.RequireBinary(t, "setpriv")
	bin, err := nstest.HelperBinary()
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"-config", writeConfig(t, "")}, {"uninstall", "-config", writeConfig(t, "")}} {
		cmd := exec.Command("setpriv", append([]string{"--reuid=65534", "--regid=65534", "--clear-groups", bin}, args...)...)
		cmd.Env = append(os.Environ(), mainEnv+"=1")
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "not running as root") || !strings.Contains(string(out), "run as root") {
			t.Errorf("%v as nobody: %v, %q", args, err, out)
		}
	}
}

func TestDryRunChangesNothing(t *testing.T) {
	nstest.RequireRoot(t)
	nstest.RequireBinary(t, "iptables-nft-restore")
	ns := nstest.New(t)
	cfg := writeConfig(t, "capture: {backend: nft, captureDNS: true}\nnetns: "+ns.Name+"\n")
	code, out, stderr := runMain(t, "-dry-run", "-config", cfg)
	if code != 0 || !strings.Contains(out, "-A OUTPUT -j BAREMESH_OUTPUT") || !strings.Contains(out, "--to-ports 15053") {
		t.Fatalf("dry run: exit %d\nstdout %s\nstderr %s", code, out, stderr)
	}
	if s := ns.Run(t, "iptables-nft-save"); strings.Contains(s, "BAREMESH") {
		t.Errorf("dry run applied rules:\n%s", s)
	}
	if code, _, stderr := runMain(t, "uninstall", "-config", cfg); code != 0 {
		t.Errorf("uninstall with nothing installed: exit %d %s", code, stderr)
	}
}
