package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/baremesh/baremesh/core/testkit"
	"github.com/baremesh/baremesh/nodeagent/nstest"
)

// lockedBuffer collects a child's output while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// configState returns the state and reason of the agent's config
// component on /status, or "" while it does not answer.
func configState(addr string) string {
	resp, err := http.Get("http://" + addr + "/status")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var doc struct {
		Components []struct{ Name, State, Reason string }
	}
	if json.NewDecoder(resp.Body).Decode(&doc) != nil {
		return ""
	}
	for _, c := range doc.Components {
		if c.Name == "config" {
			return c.State + ": " + c.Reason
		}
	}
	return ""
}

// TestSIGHUPReloads runs the command as a process, as systemd does, and
// sends it SIGHUP (what `systemctl reload` does through ExecReload): a
// new excluded port is in the rules after the reload; an invalid file is
// refused with its file, line and field in the log and on /status and
// the rules stay; SIGTERM still stops the agent cleanly.
func TestSIGHUPReloads(t *testing.T) {
	nstest.RequireRoot(t)
	nstest.RequireBinary(t, "iptables-nft-restore")
	ns := nstest.New(t)
	addr := freeAddr(t)
	base := "capture: {backend: nft}\nstatusAddress: " + addr + "\ninterval: 1h\nnetns: " + ns.Name + "\n"
	path := writeConfig(t, base)
	cmd := exec.Command(os.Args[0], "-config", path)
	cmd.Env = append(os.Environ(), mainEnv+"=1")
	var logs lockedBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("agent output:\n%s", logs.String())
		}
	})
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-exited
		}
	}()
	// The rules without iptables-nft-save's comments, which carry the
	// time of day (two saves straddling a second differ in them alone).
	save := func() string {
		var out []string
		for _, l := range strings.Split(ns.Run(t, "iptables-nft-save"), "\n") {
			if !strings.HasPrefix(l, "#") {
				out = append(out, l)
			}
		}
		return strings.Join(out, "\n")
	}
	testkit.Eventually(t, "rules and /status", func() bool {
		return strings.Contains(save(), "-A OUTPUT -j BAREMESH_OUTPUT") && strings.HasPrefix(configState(addr), "Ready: ")
	})
	write := func(content string) {
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	hup := func() {
		if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}

	write(strings.Replace(base, "{backend: nft}", "{backend: nft, outboundPortsExclude: [5432]}", 1))
	hup()
	testkit.Eventually(t, "the new exclusion in the rules", func() bool { return strings.Contains(save(), "--dport 5432 -j RETURN") })
	testkit.Eventually(t, "the reload on /status", func() bool { return strings.Contains(configState(addr), "reload applied capture") })
	if !strings.Contains(logs.String(), `msg="config reloaded"`) {
		t.Errorf("log:\n%s", logs.String())
	}
	rules := save()

	write(strings.Replace(base, "{backend: nft}", "{backend: nft, outboundPortsExclude: [5432]}\nlog:\n  level: loud", 1))
	hup()
	want := path + ":3: log.level: unknown level"
	testkit.Eventually(t, "the refusal in the log and as a Warning on /status", func() bool {
		s := configState(addr)
		return strings.Contains(logs.String(), "reload refused") && strings.Contains(logs.String(), want) &&
			strings.HasPrefix(s, "Warning: ") && strings.Contains(s, want)
	})
	if got := save(); got != rules {
		t.Errorf("a refused reload changed the rules:\n%s\nwant:\n%s", got, rules)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		if err != nil {
			t.Errorf("agent exited with %v:\n%s", err, logs.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("agent did not stop on SIGTERM:\n%s", logs.String())
	}
	if s := save(); strings.Contains(s, "BAREMESH") {
		t.Errorf("rules left after stop:\n%s", s)
	}
}
