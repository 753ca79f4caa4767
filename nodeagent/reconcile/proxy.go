package reconcile

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ProxySpec is how to run the local proxy.
type ProxySpec struct {
	Path        string   // the binary
	Args        []string // its arguments
	Env         []string // extra KEY=VALUE
	Bootstrap   string   // file whose content change requires a restart
	VersionArgs []string // arguments that print the version; default --version
	// UID and GID to run as (the capture's proxy UID/GID, so the proxy's
	// own traffic bypasses capture); nil runs as the agent's user.
	UID, GID *uint32
	// CaptureDigest summarises the capture settings the proxy depends on
	// (its ports, mode); a change requires a restart.
	CaptureDigest string
	StopTimeout   time.Duration // before SIGKILL; default 10s
	Output        io.Writer     // the proxy's stdout and stderr; default discard
}

// ProxyInputs are what a running proxy was started from.
type ProxyInputs struct {
	Version         string
	BinaryDigest    string
	BootstrapDigest string
	CaptureDigest   string
}

// RestartPredicate decides whether a running proxy started from running
// must restart to match desired.
type RestartPredicate struct {
	Reason string
	Needs  func(running, desired ProxyInputs) bool
}

// DefaultRestartPredicates restart the proxy when its binary or version,
// its bootstrap, or the capture settings it depends on changed.
var DefaultRestartPredicates = []RestartPredicate{
	{"binary version changed", func(r, d ProxyInputs) bool { return r.Version != d.Version || r.BinaryDigest != d.BinaryDigest }},
	{"bootstrap changed", func(r, d ProxyInputs) bool { return r.BootstrapDigest != d.BootstrapDigest }},
	{"capture settings changed", func(r, d ProxyInputs) bool { return r.CaptureDigest != d.CaptureDigest }},
}

// restartReasons returns the reasons of every predicate that holds.
func restartReasons(running, desired ProxyInputs, preds []RestartPredicate) []string {
	var out []string
	for _, p := range preds {
		if p.Needs(running, desired) {
			out = append(out, p.Reason)
		}
	}
	return out
}

// Proxy supervises the local proxy process. Its methods must be called
// from one goroutine at a time (the reconciler's), except Close.
type Proxy struct {
	log          *slog.Logger
	agentVersion string
	preds        []RestartPredicate

	mu      sync.Mutex
	spec    ProxySpec
	cmd     *exec.Cmd
	done    chan struct{} // closed when cmd exits
	exitErr error
	running ProxyInputs
	starts  int

	versionKey string // binary digest the cached version belongs to
	version    string
}

// NewProxy returns the proxy component. agentVersion is checked against
// the proxy's version (see CheckSkew).
func NewProxy(log *slog.Logger, spec ProxySpec, agentVersion string) *Proxy {
	return &Proxy{log: log, spec: spec, agentVersion: agentVersion, preds: DefaultRestartPredicates}
}

// Name implements Component.
func (p *Proxy) Name() string { return "proxy" }

// SetSpec replaces the spec (on config reload); the next pass applies it.
func (p *Proxy) SetSpec(spec ProxySpec) {
	p.mu.Lock()
	p.spec = spec
	p.mu.Unlock()
}

// Starts returns how many times the proxy process was started.
func (p *Proxy) Starts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.starts
}

// PID returns the running process's id, or 0.
func (p *Proxy) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.exited() {
		return 0
	}
	return p.cmd.Process.Pid
}

func (p *Proxy) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func fileDigest(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)[:8]), nil
}

// observe computes the inputs the proxy should run with now.
func (p *Proxy) observe(ctx context.Context, spec ProxySpec) (ProxyInputs, error) {
	var in ProxyInputs
	var err error
	if in.BinaryDigest, err = fileDigest(spec.Path); err != nil {
		return in, fmt.Errorf("proxy binary: %w", err)
	}
	if spec.Bootstrap != "" {
		if in.BootstrapDigest, err = fileDigest(spec.Bootstrap); err != nil {
			return in, fmt.Errorf("proxy bootstrap: %w", err)
		}
	}
	in.CaptureDigest = spec.CaptureDigest
	if p.versionKey != in.BinaryDigest {
		args := spec.VersionArgs
		if len(args) == 0 {
			args = []string{"--version"}
		}
		vctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		out, err := exec.CommandContext(vctx, spec.Path, args...).CombinedOutput()
		cancel()
		if err != nil {
			return in, fmt.Errorf("proxy version (%s %s): %w", spec.Path, strings.Join(args, " "), err)
		}
		p.version, p.versionKey = strings.TrimSpace(string(out)), in.BinaryDigest
	}
	in.Version = p.version
	return in, nil
}

// Reconcile implements Component.
func (p *Proxy) Reconcile(ctx context.Context) Status {
	p.mu.Lock()
	defer p.mu.Unlock()
	spec := p.spec
	desired, err := p.observe(ctx, spec)
	if err != nil {
		return Error("%v", err)
	}
	alive := p.cmd != nil && !p.exited()
	if err := CheckSkew(p.agentVersion, desired.Version); err != nil {
		if alive {
			return Warning("refusing proxy version %q: %v; keeping the running proxy (%q)", desired.Version, err, p.running.Version)
		}
		return Warning("refusing proxy version %q: %v; not started", desired.Version, err)
	}
	switch {
	case p.cmd == nil:
		if err := p.start(spec, desired); err != nil {
			return Error("start: %v", err)
		}
		return Ready("started (pid %d)", p.cmd.Process.Pid)
	case !alive:
		exit := p.exitErr
		if err := p.start(spec, desired); err != nil {
			return Error("proxy exited (%v); restart failed: %v", exit, err)
		}
		return Warning("proxy exited (%v); restarted (pid %d)", exit, p.cmd.Process.Pid)
	}
	if reasons := restartReasons(p.running, desired, p.preds); len(reasons) > 0 {
		why := strings.Join(reasons, ", ")
		p.log.Info("restarting proxy", "reason", why)
		p.stop(spec.StopTimeout)
		if err := p.start(spec, desired); err != nil {
			return Error("restart (%s): %v", why, err)
		}
		return Ready("restarted (%s, pid %d)", why, p.cmd.Process.Pid)
	}
	return Ready("running (pid %d)", p.cmd.Process.Pid)
}

func (p *Proxy) start(spec ProxySpec, in ProxyInputs) error {
	cmd := exec.Command(spec.Path, spec.Args...)
	cmd.Env = append(os.Environ(), spec.Env...)
	out := spec.Output
	if out == nil {
		out = io.Discard
	}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = procAttr()
	if spec.UID != nil || spec.GID != nil {
		cred := &syscall.Credential{Uid: uint32(os.Getuid()), Gid: uint32(os.Getgid()), NoSetGroups: true}
		if spec.UID != nil {
			cred.Uid = *spec.UID
		}
		if spec.GID != nil {
			cred.Gid = *spec.GID
		}
		cmd.SysProcAttr.Credential = cred
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		p.exitErr = err
		p.mu.Unlock()
		close(done)
	}()
	p.cmd, p.done, p.running, p.exitErr = cmd, done, in, nil
	p.starts++
	p.log.Info("proxy started", "pid", cmd.Process.Pid, "path", spec.Path, "version", in.Version)
	return nil
}

// stop terminates the process group: SIGTERM, then SIGKILL after timeout.
// Called with p.mu held; it releases it while waiting.
func (p *Proxy) stop(timeout time.Duration) {
	if p.cmd == nil || p.exited() {
		return
	}
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	pid, done := p.cmd.Process.Pid, p.done
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	p.mu.Unlock()
	defer p.mu.Lock()
	select {
	case <-done:
	case <-time.After(timeout):
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		<-done
	}
}

// Close stops the proxy process, if running.
func (p *Proxy) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stop(p.spec.StopTimeout)
	if p.cmd != nil && p.exitErr != nil && !errors.As(p.exitErr, new(*exec.ExitError)) {
		return p.exitErr
	}
	return nil
}
