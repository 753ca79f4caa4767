package tunnel

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/baremesh/baremesh/nodeagent/iptables"
)

// DefaultEnrolLock is the file whose flock serialises enrolment changes
// across processes (concurrent CNI invocations and the agent).
const DefaultEnrolLock = "/run/baremesh/enrol.lock"

// Enroller adds and removes ambient pods' rules in EnrolChain of one
// network namespace. Its methods are safe for concurrent use, within and
// across processes: each check-then-change runs under an flock of
// LockPath, and every iptables call waits for the xtables lock (-w).
type Enroller struct {
	Backend  iptables.Backend // nft or legacy
	NetNS    string           // empty: the current namespace
	Mark     uint32           // the tunnel's Mark; 0: DefaultMark
	LockPath string           // empty: DefaultEnrolLock
}

func (e *Enroller) mark() uint32 {
	if e.Mark == 0 {
		return DefaultMark
	}
	return e.Mark
}

// iptables runs one iptables command in the mangle table.
func (e *Enroller) iptables(ctx context.Context, args ...string) (string, error) {
	return e.ipt(ctx, false, args...)
}

// ipt runs one iptables (or, with v6, ip6tables) command in the mangle
// table.
func (e *Enroller) ipt(ctx context.Context, v6 bool, args ...string) (string, error) {
	stem := "iptables"
	if v6 {
		stem = "ip6tables"
	}
	bin := stem + "-" + string(e.Backend)
	if e.Backend == "" {
		bin = stem
	}
	argv := append([]string{bin, "-w", "5", "-t", "mangle"}, args...)
	if e.NetNS != "" {
		argv = append([]string{"ip", "netns", "exec", e.NetNS}, argv...)
	}
	var out, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out.String(), nil
}

// locked runs fn holding the enrolment flock.
func (e *Enroller) locked(fn func() error) error {
	path := e.LockPath
	if path == "" {
		path = DefaultEnrolLock
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("enrolment lock %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("enrolment lock %s: %w", path, err)
	}
	defer f.Close()
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("enrolment lock %s: %w", path, err)
	}
	defer unix.Flock(int(f.Fd()), unix.LOCK_UN) //nolint:errcheck // closing the file releases it too
	return fn()
}

// ensureChain creates EnrolChain of one family when it is missing (caller
// holds the lock).
func (e *Enroller) ensureChain(ctx context.Context, v6 bool) error {
	if _, err := e.ipt(ctx, v6, "-S", EnrolChain); err == nil {
		return nil
	}
	if _, err := e.ipt(ctx, v6, "-N", EnrolChain); err != nil {
		return fmt.Errorf("creating chain %s: %w", EnrolChain, err)
	}
	return nil
}

// EnsureChain creates EnrolChain when it is missing (IPv4, and IPv6 when
// v6); the tunnel calls it before installing its jumps.
func (e *Enroller) EnsureChain(ctx context.Context, v6 bool) error {
	return e.locked(func() error {
		if err := e.ensureChain(ctx, false); err != nil || !v6 {
			return err
		}
		return e.ensureChain(ctx, true)
	})
}

// Enroll makes traffic from ip redirected by the tunnel (IPv6 only when
// the tunnel has ipv6). Idempotent.
func (e *Enroller) Enroll(ctx context.Context, ip netip.Addr) error {
	return e.enroll(ctx, ip, enrolRule(ip, e.mark()))
}

func (e *Enroller) enroll(ctx context.Context, ip netip.Addr, rule []string) error {
	v6 := ip.Is6()
	return e.locked(func() error {
		if err := e.ensureChain(ctx, v6); err != nil {
			return fmt.Errorf("enrol %v: %w", ip, err)
		}
		if _, err := e.ipt(ctx, v6, append([]string{"-C", EnrolChain}, rule...)...); err == nil {
			return nil
		}
		if _, err := e.ipt(ctx, v6, append([]string{"-A", EnrolChain}, rule...)...); err != nil {
			return fmt.Errorf("enrol %v: %w", ip, err)
		}
		return nil
	})
}

// Unenroll removes every enrolment rule of ip (whatever its mark); an IP
// that is not enrolled, or a missing chain, is not an error.
func (e *Enroller) Unenroll(ctx context.Context, ip netip.Addr) error {
	return e.locked(func() error {
		out, err := e.ipt(ctx, ip.Is6(), "-S", EnrolChain)
		if err != nil {
			return nil // no chain: nothing enrolled
		}
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			if len(f) < 4 || f[0] != "-A" || f[2] != "-s" {
				continue
			}
			if got := parseEnrolled(line); len(got) != 1 || got[0] != ip {
				continue
			}
			args := append([]string{"-D"}, f[1:]...)
			for i := range args { // iptables -S quotes an owner comment (EnrollOwned)
				args[i] = strings.Trim(args[i], `"`)
			}
			if _, err := e.ipt(ctx, ip.Is6(), args...); err != nil {
				return fmt.Errorf("unenrol %v: %w", ip, err)
			}
		}
		return nil
	})
}

// Enrolled lists the enrolled IPs in rule order (nil when the chain is
// missing).
func (e *Enroller) Enrolled(ctx context.Context) ([]netip.Addr, error) {
	out, err := e.iptables(ctx, "-S", EnrolChain)
	if err != nil {
		if _, lerr := e.iptables(ctx, "-S", "PREROUTING"); lerr == nil {
			return nil, nil // the table works; our chain is just not there
		}
		return nil, fmt.Errorf("listing enrolled pods: %w", err)
	}
	ips := parseEnrolled(out)
	if out6, err := e.ipt(ctx, true, "-S", EnrolChain); err == nil { // no IPv6 chain: none enrolled
		ips = append(ips, parseEnrolled(out6)...)
	}
	return ips, nil
}
