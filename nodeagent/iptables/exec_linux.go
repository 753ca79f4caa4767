package iptables

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
)

// ExecRunner runs the iptables-save and iptables-restore binaries of one
// backend, optionally inside a named network namespace (ip netns exec).
type ExecRunner struct {
	Backend Backend
	NetNS   string // empty: the current namespace
}

var _ Runner = (*ExecRunner)(nil)

func (r *ExecRunner) binary(f Family, verb string) string {
	return fmt.Sprintf("%s-%s-%s", binaryStem(f), r.Backend, verb)
}

func (r *ExecRunner) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	if r.NetNS != "" {
		return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", r.NetNS, name}, args...)...)
	}
	return exec.CommandContext(ctx, name, args...)
}

// Save implements Runner.
func (r *ExecRunner) Save(ctx context.Context, f Family) (string, error) {
	name := r.binary(f, "save")
	var stdout, stderr bytes.Buffer
	cmd := r.command(ctx, name)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s: %w: %s", name, err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// Restore implements Runner.
func (r *ExecRunner) Restore(ctx context.Context, f Family, payload string) error {
	name := r.binary(f, "restore")
	var stderr bytes.Buffer
	cmd := r.command(ctx, name, "--noflush", "--wait", "5")
	cmd.Stdin, cmd.Stderr = strings.NewReader(payload), &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s --noflush: %w: %s", name, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// DetectBackend chooses the backend of the host (or of netns when not
// empty): the one requested when want is not empty, else the one that
// already holds rules (the one with more), else the one the plain
// `iptables` command uses, else nft. It returns an error wrapping
// ErrIptablesMissing when no iptables-restore binary is installed.
func DetectBackend(ctx context.Context, want Backend, netns string) (Backend, error) {
	have := map[Backend]bool{}
	for _, b := range []Backend{BackendNFT, BackendLegacy} {
		if _, err := exec.LookPath("iptables-" + string(b) + "-restore"); err == nil {
			have[b] = true
		}
	}
	switch {
	case want != "":
		if want != BackendNFT && want != BackendLegacy {
			return "", fmt.Errorf("backend: unknown backend %q (want nft, legacy or empty for auto)", want)
		}
		if !have[want] {
			return "", fmt.Errorf("%w: backend %s requested but iptables-%s-restore is not in PATH (install the iptables package)", ErrIptablesMissing, want, want)
		}
		return want, nil
	case len(have) == 0:
		return "", fmt.Errorf("%w: neither iptables-nft-restore nor iptables-legacy-restore is in PATH (install the iptables package)", ErrIptablesMissing)
	case len(have) == 1:
		for b := range have {
			return b, nil
		}
	}
	counts := map[Backend]int{}
	for _, b := range []Backend{BackendNFT, BackendLegacy} {
		r := &ExecRunner{Backend: b, NetNS: netns}
		for _, f := range []Family{V4, V6} {
			if out, err := r.Save(ctx, f); err == nil {
				counts[b] += strings.Count(out, "\n-A ")
			}
		}
	}
	switch {
	case counts[BackendLegacy] > counts[BackendNFT]:
		return BackendLegacy, nil
	case counts[BackendNFT] > counts[BackendLegacy]:
		return BackendNFT, nil
	}
	if out, err := exec.CommandContext(ctx, "iptables", "--version").Output(); err == nil && strings.Contains(string(out), "legacy") {
		return BackendLegacy, nil
	}
	return BackendNFT, nil
}
