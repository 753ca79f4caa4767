package nstest

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/baremesh/baremesh/nodeagent/nsexec"
)

// RequireRoot skips the test, saying why, unless it runs as root with the
// ip command available.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipping: network namespace tests need root (CI runs them as root)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("skipping: the ip command (iproute2) is not installed; run hack/deps.d/20-nodeagent.sh")
	}
}

// RequireBinary skips the test unless name is in PATH.
func RequireBinary(t testing.TB, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		t.Skipf("skipping: %s is not installed; run hack/deps.d/20-nodeagent.sh", name)
	}
}

// NS is a network namespace made by a test and deleted at its end.
type NS struct {
	Name string
}

// New creates a namespace with a unique name and loopback up; t.Cleanup
// deletes it (and with it every rule and link inside).
func New(t testing.TB) *NS {
	t.Helper()
	var b [4]byte
	_, _ = rand.Read(b[:])
	n := &NS{Name: fmt.Sprintf("bmt-%d-%s", os.Getpid(), hex.EncodeToString(b[:]))}
	if out, err := exec.Command("ip", "netns", "add", n.Name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", n.Name, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", n.Name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", n.Name, err, out)
		}
	})
	n.Run(t, "ip", "link", "set", "lo", "up")
	return n
}

// Try runs a command inside the namespace and returns its combined output.
func (n *NS) Try(args ...string) (string, error) {
	out, err := exec.Command("ip", append([]string{"netns", "exec", n.Name}, args...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// Run is Try that fails the test on error.
func (n *NS) Run(t testing.TB, args ...string) string {
	t.Helper()
	out, err := n.Try(args...)
	if err != nil {
		t.Fatalf("netns %s: %v", n.Name, err)
	}
	return out
}

// Do runs fn on an OS thread switched into the namespace. Sockets fn
// creates stay in the namespace after Do returns.
func (n *NS) Do(fn func() error) error { return nsexec.Do(nsexec.Path(n.Name), fn) }

// Link connects a and b with a veth pair named eth0 on both sides and
// gives each side the addresses (CIDR notation) listed; IPv6 addresses
// skip duplicate address detection.
func Link(t testing.TB, a *NS, aAddrs []string, b *NS, bAddrs []string) {
	t.Helper()
	if out, err := exec.Command("ip", "link", "add", "eth0", "netns", a.Name, "type", "veth", "peer", "name", "eth0", "netns", b.Name).CombinedOutput(); err != nil {
		t.Fatalf("creating veth between %s and %s: %v: %s", a.Name, b.Name, err, out)
	}
	for _, side := range []struct {
		ns    *NS
		addrs []string
	}{{a, aAddrs}, {b, bAddrs}} {
		for _, addr := range side.addrs {
			args := []string{"ip", "addr", "add", addr, "dev", "eth0"}
			if strings.Contains(addr, ":") {
				args = append(args, "nodad")
			}
			side.ns.Run(t, args...)
		}
		side.ns.Run(t, "ip", "link", "set", "eth0", "up")
	}
}
