package reconcile

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/baremesh/baremesh/core/testkit"
)

// fakeProxy writes a shell script that stands in for the proxy: no Envoy
// binary can be had here, and the supervisor runs any program. It prints
// its version for --version, and otherwise records its start and sleeps.
type fakeProxy struct {
	dir, path, bootstrap, starts string
}

func newFakeProxy(t *testing.T, version string) *fakeProxy {
	t.Helper()
	dir, err := os.MkdirTemp("", "fakeproxy-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil { // readable by the proxy UID
		t.Fatal(err)
	}
	f := &fakeProxy{dir: dir, path: filepath.Join(dir, "proxy"), bootstrap: filepath.Join(dir, "bootstrap.yaml"),
		starts: filepath.Join(dir, "starts")}
	f.setVersion(t, version)
	f.setBootstrap(t, "admin: {}\n")
	if err := os.WriteFile(f.starts, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(f.starts, 0o666); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fakeProxy) setVersion(t *testing.T, v string) {
	t.Helper()
	script := fmt.Sprintf("#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'fake-proxy version %s'; exit 0; fi\necho $$ >> %s\nexec sleep 600\n", v, f.starts)
	tmp := f.path + ".tmp"
	if err := os.WriteFile(tmp, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, f.path); err != nil { // like a package upgrade
		t.Fatal(err)
	}
}

func (f *fakeProxy) setBootstrap(t *testing.T, content string) {
	t.Helper()
	if err := os.WriteFile(f.bootstrap, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// waitStarts polls the file the script appends to until it has n lines.
func (f *fakeProxy) waitStarts(t *testing.T, n int) {
	t.Helper()
	testkit.Eventually(t, fmt.Sprintf("the proxy to record %d starts", n), func() bool {
		b, _ := os.ReadFile(f.starts)
		return strings.Count(string(b), "\n") == n
	})
}

func expectStatus(t *testing.T, p *Proxy, state State, reason string) {
	t.Helper()
	s := p.Reconcile(context.Background())
	if s.State != state || !strings.Contains(s.Reason, reason) {
		t.Fatalf("Reconcile = %s %q, want %s containing %q", s.State, s.Reason, state, reason)
	}
}

func waitExit(t *testing.T, pid int) {
	t.Helper()
	testkit.Eventually(t, fmt.Sprintf("process %d to exit", pid), func() bool { return syscall.Kill(pid, 0) != nil })
}

func TestProxyRestartPredicates(t *testing.T) {
	f := newFakeProxy(t, "0.1.4")
	spec := ProxySpec{Path: f.path, Bootstrap: f.bootstrap, CaptureDigest: "REDIRECT:15001:15006", StopTimeout: 5 * time.Second}
	p := NewProxy(discard(), spec, "0.1.0")
	defer p.Close()

	expectStatus(t, p, StateReady, "started")
	f.waitStarts(t, 1)
	expectStatus(t, p, StateReady, "running")
	expectStatus(t, p, StateReady, "running")

	steps := []struct {
		change func()
		reason string
	}{
		{func() { f.setBootstrap(t, "admin: {address: 127.0.0.1}\n") }, "bootstrap changed"},
		{func() { f.setVersion(t, "0.2.0") }, "binary version changed"},
		{func() { spec.CaptureDigest = "TPROXY:15001:15006"; p.SetSpec(spec) }, "capture settings changed"},
	}
	for i, st := range steps {
		old := p.PID()
		st.change()
		expectStatus(t, p, StateReady, "restarted ("+st.reason)
		f.waitStarts(t, i+2)
		waitExit(t, old)
		// The restart happens once, not on every pass.
		expectStatus(t, p, StateReady, "running")
		expectStatus(t, p, StateReady, "running")
		if got := p.Starts(); got != i+2 {
			t.Fatalf("after %s: %d starts, want %d", st.reason, got, i+2)
		}
	}

	// A proxy two minor versions away is refused; the running one stays.
	running := p.PID()
	f.setVersion(t, "0.4.0")
	expectStatus(t, p, StateWarning, "refusing proxy version \"fake-proxy version 0.4.0\"")
	expectStatus(t, p, StateWarning, "keeping the running proxy")
	if p.PID() != running || p.Starts() != 4 {
		t.Errorf("skewed binary restarted the proxy (pid %d -> %d, %d starts)", running, p.PID(), p.Starts())
	}

	// Stopping it for good.
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	waitExit(t, running)
}

func TestProxyExitIsRestarted(t *testing.T) {
	f := newFakeProxy(t, "0.1.0")
	p := NewProxy(discard(), ProxySpec{Path: f.path}, "0.1.0")
	defer p.Close()
	expectStatus(t, p, StateReady, "started")
	pid := p.PID()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "the exit to be noticed", func() bool { return p.PID() == 0 })
	expectStatus(t, p, StateWarning, "proxy exited (signal: killed); restarted")
	if p.PID() == 0 || p.PID() == pid || p.Starts() != 2 {
		t.Errorf("after exit: pid %d (was %d), %d starts", p.PID(), pid, p.Starts())
	}
}

func TestProxyRefusedAndBroken(t *testing.T) {
	f := newFakeProxy(t, "0.9.0")
	p := NewProxy(discard(), ProxySpec{Path: f.path}, "0.1.0")
	expectStatus(t, p, StateWarning, "not started")
	if p.Starts() != 0 {
		t.Error("skewed proxy started")
	}
	missing := NewProxy(discard(), ProxySpec{Path: filepath.Join(f.dir, "nope")}, "0.1.0")
	expectStatus(t, missing, StateError, "proxy binary: open")
	noBootstrap := NewProxy(discard(), ProxySpec{Path: f.path, Bootstrap: filepath.Join(f.dir, "none.yaml")}, "0.9.0")
	expectStatus(t, noBootstrap, StateError, "proxy bootstrap")
}

func TestProxyRunsAsProxyUID(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping: running the proxy as another user needs root")
	}
	f := newFakeProxy(t, "0.1.0")
	uid, gid := uint32(1337), uint32(1337)
	p := NewProxy(discard(), ProxySpec{Path: f.path, UID: &uid, GID: &gid}, "0.1.0")
	defer p.Close()
	expectStatus(t, p, StateReady, "started")
	f.waitStarts(t, 1)
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.PID()))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(status), "\nUid:\t1337\t1337\t1337\t1337\n") || !strings.Contains(string(status), "\nGid:\t1337\t") {
		t.Errorf("proxy not running as 1337:\n%s", status)
	}
}
