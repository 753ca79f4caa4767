package pkgtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// prevVersion is the "previous release" built for the upgrade test.
const prevVersion = "0.0.9"

// needRoot skips a test that needs root and the named tools.
func needRoot(t *testing.T, tools ...string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipped: packaging tests need root (dpkg, rpm --root, systemd-nspawn, mounts); CI runs them as root")
	}
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("skipped: %s not installed (hack/deps.d/30-packaging.sh installs it)", tool)
		}
	}
}

func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "packaging", "baremesh.yaml")); err != nil {
		t.Fatalf("repository root not found from %s: %v", dir, err)
	}
	return dir
}

// pkgs are the four packages of one version.
type pkgs struct {
	Version                      string
	Deb, AgentDeb, RPM, AgentRPM string
}

var (
	buildMu sync.Mutex
	built   = map[string]pkgs{}
	distDir string
)

// buildPackages runs `make package` for version (once per test binary)
// into a temporary dist directory.
func buildPackages(t *testing.T, version string) pkgs {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	if p, ok := built[version]; ok {
		return p
	}
	if distDir == "" {
		d, err := os.MkdirTemp("", "baremesh-dist-")
		if err != nil {
			t.Fatal(err)
		}
		distDir = d
	}
	dist := filepath.Join(distDir, version)
	cmd := exec.Command("make", "-s", "package", "VERSION="+version, "DIST="+dist)
	cmd.Dir = repoRoot(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make package VERSION=%s: %v\n%s", version, err, out)
	}
	arch := strings.TrimSpace(run(t, "go", "env", "GOARCH"))
	rpmArch := map[string]string{"amd64": "x86_64", "arm64": "aarch64"}[arch]
	p := pkgs{
		Version:  version,
		Deb:      filepath.Join(dist, fmt.Sprintf("baremesh_%s_%s.deb", version, arch)),
		AgentDeb: filepath.Join(dist, fmt.Sprintf("baremesh-agent_%s_%s.deb", version, arch)),
		RPM:      filepath.Join(dist, fmt.Sprintf("baremesh-%s-1.%s.rpm", version, rpmArch)),
		AgentRPM: filepath.Join(dist, fmt.Sprintf("baremesh-agent-%s-1.%s.rpm", version, rpmArch)),
	}
	for _, f := range []string{p.Deb, p.AgentDeb, p.RPM, p.AgentRPM} {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatalf("make package did not write %s: %v", f, err)
		}
		t.Logf("%s: %d bytes (%.1f MiB)", filepath.Base(f), fi.Size(), float64(fi.Size())/(1<<20))
	}
	built[version] = p
	return p
}

// currentVersion is the VERSION file's.
func currentVersion(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// run runs a host command and fails the test on error.
func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

func TestMain(m *testing.M) {
	code := m.Run()
	if distDir != "" {
		os.RemoveAll(distDir)
	}
	os.Exit(code)
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
