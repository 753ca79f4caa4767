package e2e

import (
	"testing"
	"time"

	"github.com/baremesh/baremesh/core/testkit"
	"github.com/baremesh/baremesh/internal/daemonconfig"
)

// TestReplicasRestartedTogether (issue #15, state that survives, with
// replicas): three replicas with their own state directories hold three
// registrations; all three stop at once and start again. They come back
// with every registration (each replica restores the table it saved),
// before any proxy reconnects; the two VMs that reconnect (to another
// replica than before) keep theirs, and the one that never comes back is
// removed after the grace period.
func TestReplicasRestartedTogether(t *testing.T) {
	static, vm := startBackend(t, "static"), startBackend(t, "vm")
	files := vmFiles(static, vm)
	states := map[string]string{"cp-a": t.TempDir(), "cp-b": t.TempDir(), "cp-c": t.TempDir()}
	start := func(name string, seeds ...string) *mesh {
		return startMeshWith(t, files, func(c *daemonconfig.Config) {
			c.Cluster = daemonconfig.ClusterConfig{Name: name, Bind: "127.0.0.1:0", Seeds: seeds}
			c.AllowUnauthenticatedRegistration = true
			c.RegistrationGrace = daemonconfig.Duration{Duration: replicaGrace}
			c.StateDir = states[name]
		})
	}
	trio := func() []*mesh {
		a := start("cp-a")
		seed := clusterz(t, a).Addr
		ms := []*mesh{a, start("cp-b", seed), start("cp-c", seed)}
		for _, m := range ms {
			testkit.EventuallyWithin(t, e2eWait, "three members", func() bool { return len(clusterz(t, m).Members) == 3 })
		}
		return ms
	}
	ms := trio()
	vms := []struct{ ip, pod string }{{"127.0.0.11", "vm-1"}, {"127.0.0.12", "vm-2"}, {"127.0.0.13", "vm-3"}}
	for i, v := range vms {
		vmClient(t, ms[i], v.ip, v.pod)
	}
	for _, m := range ms {
		testkit.EventuallyWithin(t, e2eWait, "three registrations everywhere", func() bool { return len(registrations(t, m)) == 3 })
	}
	for _, m := range ms {
		m.stop()
	}
	ms = trio()
	for _, m := range ms {
		if n := len(registrations(t, m)); n != 3 {
			t.Fatalf("replica %s came back with %d registrations, want the 3 it saved", m.d.HTTPAddr(), n)
		}
	}
	// vm-1 and vm-2 reconnect, each to the next replica; vm-3 never does.
	vmClient(t, ms[1], vms[0].ip, vms[0].pod)
	vmClient(t, ms[2], vms[1].ip, vms[1].pod)
	for _, m := range ms {
		testkit.EventuallyWithin(t, e2eWait, "vm-3's entry removed after the grace period", func() bool {
			o := owners(t, m)
			_, gone := o["vm-127.0.0.13"]
			return !gone && o["vm-127.0.0.11"] == "cp-b" && o["vm-127.0.0.12"] == "cp-c"
		})
	}
	// Nothing else goes after the grace period.
	from := time.Now()
	testkit.EventuallyWithin(t, 2*replicaGrace, "a grace period to pass", func() bool { return time.Since(from) > replicaGrace+time.Second })
	for _, m := range ms {
		if n := len(registrations(t, m)); n != 2 {
			t.Errorf("%d registrations on %s after the grace period, want 2", n, m.d.HTTPAddr())
		}
	}
}
