package tunnel

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/baremesh/baremesh/nodeagent/iptables"
)

// TestEnrolTraffic: with no PodCIDR covering the pod, its traffic goes
// direct until the pod is enrolled, through the proxy while it is, and
// direct again after Unenroll. The proxy's replies find the pod through
// the connmark path (no route to the pod's address in the proxy).
func TestEnrolTraffic(t *testing.T) {
	tp := newTopology(t, KindVXLAN)
	tp.cfg.PodCIDRs = []netip.Prefix{netip.MustParsePrefix("10.250.0.0/16")} // not the pod's
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	tun, err := New(log, tp.cfg, tp.node.Name, tp.proxy.Name, iptables.BackendNFT)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if changed, err := tun.Ensure(ctx); err != nil {
		t.Fatalf("Ensure: %v (changed %v)", err, changed)
	}
	t.Cleanup(func() { _ = tun.Remove(ctx) })
	expectBanner(t, tp.pod, "outside orig=10.200.3.2:8080 src=10.200.1.2:")

	en := &Enroller{Backend: iptables.BackendNFT, NetNS: tp.node.Name, LockPath: filepath.Join(t.TempDir(), "enrol.lock")}
	pod := netip.MustParseAddr("10.200.1.2")
	for range 2 { // idempotent
		if err := en.Enroll(ctx, pod); err != nil {
			t.Fatalf("Enroll: %v", err)
		}
	}
	expectBanner(t, tp.pod, "ztunnel orig=10.200.3.2:8080 src=10.200.1.2:")
	if got, err := en.Enrolled(ctx); err != nil || len(got) != 1 {
		t.Errorf("Enrolled = %v, %v; want the pod once", got, err)
	}
	// A re-apply of the tunnel's own rules keeps the enrolment.
	tp.node.Run(t, "ip", "rule", "del", "fwmark", "0x100/0x100", "lookup", "100")
	if _, err := tun.Ensure(ctx); err != nil {
		t.Fatalf("Ensure after drift: %v", err)
	}
	expectBanner(t, tp.pod, "ztunnel orig=10.200.3.2:8080")

	for range 2 {
		if err := en.Unenroll(ctx, pod); err != nil {
			t.Fatalf("Unenroll: %v", err)
		}
	}
	expectBanner(t, tp.pod, "outside orig=10.200.3.2:8080 src=10.200.1.2:")
}

// TestEnrolConcurrent: 20 IPs enrolled twice each by 40 goroutines leave
// exactly 20 rules; unenrolling them all leaves none.
func TestEnrolConcurrent(t *testing.T) {
	tp := newTopology(t, KindVXLAN)
	en := &Enroller{Backend: iptables.BackendNFT, NetNS: tp.node.Name, LockPath: filepath.Join(t.TempDir(), "enrol.lock")}
	ctx := context.Background()
	var ips []netip.Addr
	for i := range 20 {
		ips = append(ips, netip.MustParseAddr(fmt.Sprintf("10.77.0.%d", i+1)))
	}
	run := func(fn func(context.Context, netip.Addr) error) {
		var wg sync.WaitGroup
		errs := make(chan error, 2*len(ips))
		for _, ip := range append(append([]netip.Addr(nil), ips...), ips...) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := fn(ctx, ip); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	}
	run(en.Enroll)
	got, err := en.Enrolled(ctx)
	if err != nil || len(got) != 20 {
		t.Fatalf("after concurrent Enroll: %d rules (%v), %v; want 20", len(got), got, err)
	}
	seen := map[netip.Addr]bool{}
	for _, ip := range got {
		seen[ip] = true
	}
	if len(seen) != 20 {
		t.Errorf("duplicate rules: %v", got)
	}
	run(en.Unenroll)
	if got, err := en.Enrolled(ctx); err != nil || len(got) != 0 {
		t.Errorf("after Unenroll: %v, %v; want none", got, err)
	}
}
