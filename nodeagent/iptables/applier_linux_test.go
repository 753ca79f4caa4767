package iptables

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baremesh/baremesh/nodeagent/nstest"
)

// failingRunner passes calls through but fails the restore of one family.
type failingRunner struct {
	Runner
	failOn   Family
	restores atomic.Int32
	armed    atomic.Bool
}

func (r *failingRunner) Restore(ctx context.Context, f Family, payload string) error {
	r.restores.Add(1)
	if r.armed.Load() && f == r.failOn {
		r.armed.Store(false) // let the rollback through
		return errors.New("injected failure")
	}
	return r.Runner.Restore(ctx, f, payload)
}

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// TestApplyFailureKeepsPreviousRules: a failed apply (IPv6 fails after
// IPv4 was committed) leaves the previous rules in force in both families.
func TestApplyFailureKeepsPreviousRules(t *testing.T) {
	for _, b := range backends {
		t.Run(string(b), func(t *testing.T) {
			t.Parallel()
			h := newHost(t, b, false)
			runner := &failingRunner{Runner: h.runner, failOn: V6}
			h.applier = NewApplier(discard(), ApplierOptions{Runner: runner})
			apply(t, h, Config{})
			good := h.save(t)

			next, err := Render(Config{InboundPortsExclude: []int{8080}, OutboundPortsExclude: []int{9090}})
			if err != nil {
				t.Fatal(err)
			}
			runner.armed.Store(true)
			err = h.applier.Apply(context.Background(), next)
			if !errors.Is(err, ErrApply) || !strings.Contains(err.Error(), "injected failure") {
				t.Fatalf("Apply = %v, want the injected failure wrapped in ErrApply", err)
			}
			if got := h.save(t); got != good {
				t.Errorf("failed apply changed the rules:\n%s\nwant:\n%s", got, good)
			}
			expect(t, h.peer, "tcp4", "10.77.0.2:8080", "proxy-in")
			expect(t, h.vm, "tcp4", "10.77.0.1:9090", "proxy-out")
			if h.applier.Applied() == next {
				t.Error("failed ruleset recorded as applied")
			}

			// Invalid input never reaches the host.
			calls := runner.restores.Load()
			if _, err := Render(Config{OutboundIPRanges: []string{"10.0.0.0/40"}}); err == nil {
				t.Fatal("invalid CIDR accepted")
			}
			if runner.restores.Load() != calls || h.save(t) != good {
				t.Error("invalid config touched the host")
			}
		})
	}
}

func TestDryRun(t *testing.T) {
	h := newHost(t, BackendNFT, false)
	before := h.save(t)
	var out bytes.Buffer
	a := NewApplier(discard(), ApplierOptions{Runner: h.runner, DryRun: &out})
	rs, err := Render(Config{Mode: ModeTProxy})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Apply(context.Background(), rs); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"-A PREROUTING -j BAREMESH_PREROUTING", "ip6tables-restore --noflush", "ip rule add fwmark 0x539 lookup 133"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("dry run output lacks %q:\n%s", want, out.String())
		}
	}
	if after := h.save(t); after != before {
		t.Errorf("dry run changed rules:\n%s", after)
	}
}

func TestIptablesMissing(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	for _, want := range []Backend{"", BackendNFT} {
		_, err := DetectBackend(context.Background(), want, "")
		if !errors.Is(err, ErrIptablesMissing) || !strings.Contains(err.Error(), "install the iptables package") {
			t.Errorf("DetectBackend(%q) = %v, want ErrIptablesMissing with a hint", want, err)
		}
	}
	_, err := (&ExecRunner{Backend: BackendNFT}).Save(context.Background(), V4)
	if err == nil || !strings.Contains(err.Error(), "iptables-nft-save") {
		t.Errorf("Save without binaries = %v, want an error naming the binary", err)
	}
	if _, err := DetectBackend(context.Background(), "nftables", ""); err == nil || !strings.Contains(err.Error(), "backend") {
		t.Errorf("unknown backend accepted: %v", err)
	}
}

func TestDetectBackendPrefersTheOneInUse(t *testing.T) {
	nstest.RequireRoot(t)
	nstest.RequireBinary(t, "iptables-legacy-restore")
	nstest.RequireBinary(t, "iptables-nft-restore")
	ns := nstest.New(t)
	ns.Run(t, "iptables-legacy", "-A", "INPUT", "-p", "tcp", "--dport", "1", "-j", "ACCEPT")
	got, err := DetectBackend(context.Background(), "", ns.Name)
	if err != nil || got != BackendLegacy {
		t.Errorf("DetectBackend with legacy rules = %q, %v", got, err)
	}
	ns2 := nstest.New(t)
	ns2.Run(t, "iptables-nft", "-A", "INPUT", "-p", "tcp", "--dport", "1", "-j", "ACCEPT")
	if got, err := DetectBackend(context.Background(), "", ns2.Name); err != nil || got != BackendNFT {
		t.Errorf("DetectBackend with nft rules = %q, %v", got, err)
	}
}

func benchHost(b *testing.B, backend Backend) (*nstest.NS, *Applier, *Ruleset) {
	nstest.RequireRoot(b)
	nstest.RequireBinary(b, "iptables-"+string(backend)+"-restore")
	ns := nstest.New(b)
	a := NewApplier(discard(), ApplierOptions{Runner: &ExecRunner{Backend: backend, NetNS: ns.Name}})
	rs, err := Render(Config{CaptureDNS: true, DropInvalid: true, InboundPortsExclude: []int{8081},
		OutboundPortsExclude: []int{5432}, OutboundIPRangesExclude: []string{"169.254.169.254/32"}, HostDNSServers: []string{"127.0.0.53"}})
	if err != nil {
		b.Fatal(err)
	}
	return ns, a, rs
}

// BenchmarkApply times applying a typical ruleset (both families, in a
// namespace, including reading it back).
func BenchmarkApply(b *testing.B) {
	for _, backend := range backends {
		b.Run(string(backend), func(b *testing.B) {
			_, a, rs := benchHost(b, backend)
			var total time.Duration
			for b.Loop() {
				start := time.Now()
				if err := a.Apply(context.Background(), rs); err != nil {
					b.Fatal(err)
				}
				total += time.Since(start)
			}
			b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms/apply")
		})
	}
}

// BenchmarkDriftRepair times noticing a rule deleted by hand and putting
// it back (Check + re-apply), and a Check that finds nothing.
func BenchmarkDriftRepair(b *testing.B) {
	for _, backend := range backends {
		b.Run(string(backend), func(b *testing.B) {
			ns, a, rs := benchHost(b, backend)
			if err := a.Apply(context.Background(), rs); err != nil {
				b.Fatal(err)
			}
			var repair, check time.Duration
			for b.Loop() {
				b.StopTimer()
				ns.Run(b, "iptables-"+string(backend), "-t", "nat", "-D", "OUTPUT", "-j", "BAREMESH_OUTPUT")
				b.StartTimer()
				start := time.Now()
				d, err := a.Repair(context.Background())
				if err != nil || !d.Any() {
					b.Fatalf("Repair = %v, %v", d, err)
				}
				repair += time.Since(start)
				start = time.Now()
				if d, err := a.Check(context.Background()); err != nil || d.Any() {
					b.Fatalf("Check after repair = %v, %v", d, err)
				}
				check += time.Since(start)
			}
			b.ReportMetric(float64(repair.Microseconds())/1000/float64(b.N), "ms/repair")
			b.ReportMetric(float64(check.Microseconds())/1000/float64(b.N), "ms/check")
		})
	}
}
