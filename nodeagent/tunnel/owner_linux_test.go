package tunnel

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/baremesh/baremesh/nodeagent/iptables"
	"github.com/baremesh/baremesh/nodeagent/nstest"
)

// TestEnrolOwnedSweepAndDelByContainer: enrolments tagged with their pod
// sandbox are removed by container ID (a DEL without prevResult) and,
// when the pod's namespace is gone, by SweepStale; untagged ones stay.
func TestEnrolOwnedSweepAndDelByContainer(t *testing.T) {
	for _, b := range []iptables.Backend{iptables.BackendNFT, iptables.BackendLegacy} {
		t.Run(string(b), func(t *testing.T) {
			nstest.RequireRoot(t)
			nstest.RequireBinary(t, "iptables-"+string(b))
			ns := nstest.New(t)
			dir := t.TempDir()
			live := filepath.Join(dir, "cni-live")
			if err := os.WriteFile(live, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			en := &Enroller{Backend: b, NetNS: ns.Name, LockPath: filepath.Join(dir, "lock")}
			ctx := context.Background()
			ips := map[string]netip.Addr{"live": netip.MustParseAddr("10.1.0.5"), "gone": netip.MustParseAddr("10.1.0.6"),
				"other": netip.MustParseAddr("10.1.0.7"), "untagged": netip.MustParseAddr("10.1.0.8")}
			for name, nsPath := range map[string]string{"live": live, "gone": filepath.Join(dir, "cni-gone"), "other": live} {
				owner, err := Owner("c-"+name, nsPath)
				if err != nil {
					t.Fatal(err)
				}
				for range 2 { // idempotent
					if err := en.EnrollOwned(ctx, ips[name], owner); err != nil {
						t.Fatalf("EnrollOwned %s: %v", name, err)
					}
				}
			}
			if err := en.Enroll(ctx, ips["untagged"]); err != nil {
				t.Fatal(err)
			}
			enrolled := func() []netip.Addr {
				got, err := en.Enrolled(ctx)
				if err != nil {
					t.Fatal(err)
				}
				slices.SortFunc(got, netip.Addr.Compare)
				return got
			}
			if got := enrolled(); len(got) != 4 {
				t.Fatalf("enrolled %v, want 4", got)
			}
			gone, err := en.SweepStale(ctx)
			if err != nil || !slices.Equal(gone, []netip.Addr{ips["gone"]}) {
				t.Errorf("SweepStale = %v, %v; want [%v]", gone, err, ips["gone"])
			}
			if err := en.UnenrollContainer(ctx, "c-live"); err != nil {
				t.Fatal(err)
			}
			if err := en.UnenrollContainer(ctx, "c-nothing"); err != nil {
				t.Errorf("unknown container: %v", err)
			}
			if got := enrolled(); !slices.Equal(got, []netip.Addr{ips["other"], ips["untagged"]}) {
				t.Errorf("after sweep and DEL by container: %v, want [%v %v]", got, ips["other"], ips["untagged"])
			}
			if _, err := Owner("c 1", live); err == nil {
				t.Error("owner with a space accepted")
			}
		})
	}
}
