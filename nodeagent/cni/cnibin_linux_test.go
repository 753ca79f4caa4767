package cni

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// pluginsVersion must match the github.com/containernetworking/plugins
// tool requirement in go.mod (hack/deps.d/40-cni.sh builds the same).
const pluginsVersion = "v1.9.1"

var realPlugins = map[string]string{
	"bridge":     "github.com/containernetworking/plugins/plugins/main/bridge",
	"host-local": "github.com/containernetworking/plugins/plugins/ipam/host-local",
	"loopback":   "github.com/containernetworking/plugins/plugins/main/loopback",
}

var (
	realOnce sync.Once
	realDir  string
	realErr  error
)

// realPluginDir returns a directory holding the real bridge, host-local
// and loopback plugins, building them with go build on first use.
func realPluginDir(t testing.TB) string {
	t.Helper()
	realOnce.Do(func() {
		realDir = os.Getenv("BAREMESH_CNI_BIN")
		if realDir == "" {
			realDir = filepath.Join("/var/cache/baremesh-test/cni-bin", pluginsVersion)
		}
		missing := false
		for name := range realPlugins {
			if _, err := os.Stat(filepath.Join(realDir, name)); err != nil {
				missing = true
			}
		}
		if !missing {
			return
		}
		if _, err := exec.LookPath("go"); err != nil {
			realErr = err
			return
		}
		if realErr = os.MkdirAll(realDir, 0o755); realErr != nil {
			return
		}
		tmp, err := os.MkdirTemp(realDir, ".build-")
		if err != nil {
			realErr = err
			return
		}
		defer os.RemoveAll(tmp)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		args := []string{"build", "-o", tmp + "/"}
		for _, pkg := range realPlugins {
			args = append(args, pkg)
		}
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			realErr = &buildError{err: err, out: string(out)}
			return
		}
		for name := range realPlugins {
			if err := os.Rename(filepath.Join(tmp, name), filepath.Join(realDir, name)); err != nil {
				realErr = err
				return
			}
		}
	})
	if realErr != nil {
		t.Skipf("skipping: cannot build the real CNI plugins (run hack/deps.d/40-cni.sh): %v", realErr)
	}
	return realDir
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return e.err.Error() + ": " + e.out }

// binDir makes a CNI bin dir with the real plugins and this test binary
// as baremesh-cni.
func binDir(t testing.TB) string {
	t.Helper()
	real := realPluginDir(t)
	dir := t.TempDir()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	links := map[string]string{PluginName: self}
	for name := range realPlugins {
		links[name] = filepath.Join(real, name)
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
