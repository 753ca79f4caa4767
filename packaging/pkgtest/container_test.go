package pkgtest

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

const (
	cacheDir = "/var/cache/baremesh-test"
	// rootfsName changes when the debootstrap arguments do.
	rootfsName = "bookworm-rootfs-v2"
	include    = "systemd,systemd-sysv,dbus,iptables,procps"
)

// mirror is the Debian mirror this machine's apt uses.
func mirror() string {
	for _, f := range []string{"/etc/apt/sources.list.d/debian.sources", "/etc/apt/sources.list"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(strings.NewReader(string(b)))
		for sc.Scan() {
			l := strings.TrimSpace(sc.Text())
			if u, ok := strings.CutPrefix(l, "URIs:"); ok && !strings.Contains(u, "security") {
				return strings.Fields(u)[0]
			}
			if f := strings.Fields(l); len(f) >= 3 && f[0] == "deb" && !strings.Contains(f[1], "security") {
				return f[1]
			}
		}
	}
	return "http://deb.debian.org/debian"
}

// rootfs returns the cached minimal Debian root, made once with
// debootstrap under a lock (concurrent test runs share it).
func rootfs(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(cacheDir, rootfsName)
	if _, err := os.Stat(filepath.Join(dir, "usr/lib/systemd/systemd")); err == nil {
		return dir
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		t.Fatal(err)
	}
	lock, err := os.OpenFile(filepath.Join(cacheDir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatalf("lock %s: %v", cacheDir, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "usr/lib/systemd/systemd")); err == nil {
		return dir // made while we waited
	}
	tmp := dir + ".tmp"
	os.RemoveAll(tmp)
	start := time.Now()
	cmd := exec.Command("debootstrap", "--variant=minbase", "--include="+include, "bookworm", tmp, mirror())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("debootstrap: %v\n%s", err, lastLines(string(out), 20))
	}
	if err := os.Rename(tmp, dir); err != nil {
		t.Fatal(err)
	}
	t.Logf("debootstrap made %s in %v", dir, time.Since(start).Round(time.Second))
	return dir
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

// overlay mounts a writable overlay of the cached rootfs (upper layer on
// a tmpfs) and returns its merged root; cleanup unmounts it.
func overlay(t *testing.T) string {
	t.Helper()
	lower := rootfs(t)
	base := t.TempDir()
	if err := syscall.Mount("tmpfs", base, "tmpfs", 0, "mode=0755"); err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	root := filepath.Join(base, "root")
	for _, d := range []string{"upper", "work", "root"} {
		if err := os.Mkdir(filepath.Join(base, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s/upper,workdir=%s/work", lower, base, base)
	if err := syscall.Mount("overlay", root, "overlay", 0, opts); err != nil {
		syscall.Unmount(base, 0)
		t.Fatalf("mount overlay: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(root, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", root, err)
		}
		if err := syscall.Unmount(base, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", base, err)
		}
	})
	return root
}

// container is a Debian booted with systemd-nspawn (own network
// namespace: only loopback, so its ports never clash with the host's).
type container struct {
	t      *testing.T
	root   string
	nspawn *exec.Cmd
	pid    int // the container's init (systemd), as seen from the host
	done   chan error
}

func boot(t *testing.T) *container {
	t.Helper()
	root := overlay(t)
	logf, err := os.Create(filepath.Join(t.TempDir(), "nspawn.log"))
	if err != nil {
		t.Fatal(err)
	}
	c := &container{t: t, root: root, done: make(chan error, 1)}
	c.nspawn = exec.Command("systemd-nspawn", "-D", root, "-b", "--register=no", "--keep-unit",
		"--private-network", "--console=passive", "-q")
	c.nspawn.Stdout, c.nspawn.Stderr = logf, logf
	if err := c.nspawn.Start(); err != nil {
		t.Fatalf("systemd-nspawn: %v", err)
	}
	go func() { c.done <- c.nspawn.Wait(); logf.Close() }()
	t.Cleanup(c.shutdown)
	// The container's init is the nspawn process's child running systemd.
	c.poll("the container's init", 30*time.Second, func() bool {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", c.nspawn.Process.Pid, c.nspawn.Process.Pid))
		if err != nil {
			return false
		}
		for _, f := range strings.Fields(string(b)) {
			var pid int
			fmt.Sscan(f, &pid)
			if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); strings.TrimSpace(string(comm)) == "systemd" {
				c.pid = pid
				return true
			}
		}
		return false
	})
	// Until its D-Bus is up, systemctl cannot tell; then wait for boot.
	var state string
	c.poll("the container's systemd to finish booting", 60*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		out, _ := c.execCtx(ctx, "systemctl", "is-system-running", "--wait")
		state = strings.TrimSpace(lastLines(out, 1))
		return state == "running" || state == "degraded"
	})
	if state == "degraded" {
		failed, _ := c.exec("systemctl", "--failed", "--no-legend")
		t.Logf("container booted degraded: %s", failed)
	}
	return c
}

func (c *container) shutdown() {
	// systemd-nspawn turns SIGTERM into an orderly poweroff of the container.
	_ = c.nspawn.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		c.t.Errorf("container did not power off within 30s; killing systemd-nspawn")
		_ = c.nspawn.Process.Kill()
		<-c.done
	}
}

// exec runs a command inside the container (all its namespaces).
func (c *container) exec(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return c.execCtx(ctx, args...)
}

func (c *container) execCtx(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "nsenter", append([]string{"-t", fmt.Sprint(c.pid), "-a", "--"}, args...)...)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8", "SYSTEMD_PAGER=", "SYSTEMD_COLORS=0",
		"DEBIAN_FRONTEND=noninteractive"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("in container: %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// must runs a command in the container and fails the test on error.
func (c *container) must(args ...string) string {
	c.t.Helper()
	out, err := c.exec(args...)
	if err != nil {
		c.t.Fatal(err)
	}
	return out
}

// sh runs a shell command line in the container.
func (c *container) sh(script string) string { c.t.Helper(); return c.must("sh", "-c", script) }

// write puts a file into the container (through the overlay's root).
func (c *container) write(path, content string) {
	c.t.Helper()
	if err := os.MkdirAll(filepath.Dir(filepath.Join(c.root, path)), 0o755); err != nil {
		c.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(c.root, path), []byte(content), 0o644); err != nil {
		c.t.Fatal(err)
	}
}

// exists reports whether a path exists in the container.
func (c *container) exists(path string) bool {
	_, err := c.exec("test", "-e", path)
	return err == nil
}

// show returns systemctl show properties of a unit.
func (c *container) show(unit string) map[string]string {
	c.t.Helper()
	out := c.must("systemctl", "show", unit, "-p", "ActiveState,SubState,MainPID,NRestarts,StatusText,Result,ExecMainStatus,UnitFileState")
	m := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			m[k] = v
		}
	}
	return m
}

// poll waits for cond with a deadline, checking every 50ms.
func (c *container) poll(what string, within time.Duration, cond func() bool) {
	c.t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			c.t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// journal is the unit's log since boot, message text only.
func (c *container) journal(unit string) string {
	c.t.Helper()
	return c.must("journalctl", "-u", unit, "--no-pager", "-o", "cat")
}
