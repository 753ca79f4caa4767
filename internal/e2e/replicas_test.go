package e2e

import (
	"fmt"
	"net/url"
	"regexp"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/xds"

	"github.com/baremesh/baremesh/core/cluster"
	"github.com/baremesh/baremesh/core/testkit"
	"github.com/baremesh/baremesh/internal/daemonconfig"
)

// replicaGrace is the registration grace period of the replica tests.
const replicaGrace = 3 * time.Second

// startReplica is a baremeshd with a cluster: block (gossip on its own
// loopback port, joined through seeds) over the vm files; plaintext xDS
// on loopback with allowUnauthenticatedRegistration (each replica has its
// own CA here, so the VMs register unauthenticated).
func startReplica(t *testing.T, name string, files map[string]string, seeds ...string) *mesh {
	t.Helper()
	return startMeshWith(t, files, func(c *daemonconfig.Config) {
		c.Cluster = daemonconfig.ClusterConfig{Name: name, Bind: "127.0.0.1:0", Seeds: seeds}
		c.AllowUnauthenticatedRegistration = true
		c.RegistrationGrace = daemonconfig.Duration{Duration: replicaGrace}
	})
}

func clusterz(t *testing.T, m *mesh) cluster.Status {
	var s cluster.Status
	getJSON(t, "http://"+m.d.HTTPAddr()+"/debug/clusterz", &s)
	return s
}

// vmClient is a grpc-go xDS client of echo.mesh whose node asks to be
// auto-registered into group vm, connected to m over plaintext.
func vmClient(t *testing.T, m *mesh, ip, pod string) *grpc.ClientConn {
	t.Helper()
	bootstrap := fmt.Sprintf(`{
  "xds_servers": [{"server_uri": %q, "channel_creds": [{"type": "insecure"}], "server_features": ["xds_v3"]}],
  "node": {"id": "sidecar~%s~%s.default~default.svc.cluster.local", "metadata": {"GENERATOR": "grpc", "AUTO_REGISTER_GROUP": "vm", "LABELS": {"version": "v1"}}}
}`, m.d.XDSAddr(), ip, pod)
	res, err := xds.NewXDSResolverWithConfigForTesting([]byte(bootstrap))
	if err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient("xds:///echo.mesh:7070", grpc.WithResolvers(res), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	cc.Connect()
	t.Cleanup(func() { cc.Close() })
	return cc
}

// owners is namespace/name → owner of m's /debug/registrationz.
func owners(t *testing.T, m *mesh) map[string]string {
	out := map[string]string{}
	for _, r := range registrations(t, m) {
		out[fmt.Sprint(r["name"])] = fmt.Sprint(r["owner"])
	}
	return out
}

// TestReplicasShareRegistrations: three baremeshd in one memberlist
// cluster on loopback. A VM registered at cp-a shows at cp-b and cp-c
// (registrationz, owned by cp-a) and in the EDS cp-b serves a second
// client, which reaches it; the VM moves to cp-b → cp-b owns it, and the
// client's EDS at cp-c never lost it; cp-a crashes (no leave) → its
// entries survive on cp-b and cp-c, and the one whose proxy never comes
// back is removed by a survivor after the grace period.
func TestReplicasShareRegistrations(t *testing.T) {
	static, vm := startBackend(t, "static"), startBackend(t, "vm")
	files := vmFiles(static, vm)
	a := startReplica(t, "cp-a", files)
	seed := clusterz(t, a).Addr
	b := startReplica(t, "cp-b", files, seed)
	c := startReplica(t, "cp-c", files, seed)
	for _, m := range []*mesh{a, b, c} {
		testkit.EventuallyWithin(t, e2eWait, "three members", func() bool { return len(clusterz(t, m).Members) == 3 })
	}
	client := b.xdsClient(t, "client")
	allTo(t, t.Context(), client, "static")

	vm1 := vmClient(t, a, "127.0.0.1", "vm-1")
	vmClient(t, a, "127.0.0.2", "vm-2") // never moves: removed after a's crash
	for _, m := range []*mesh{a, b, c} {
		testkit.EventuallyWithin(t, e2eWait, "both VMs registered, owned by cp-a, on "+m.d.HTTPAddr(), func() bool {
			o := owners(t, m)
			return o["vm-127.0.0.1"] == "cp-a" && o["vm-127.0.0.2"] == "cp-a"
		})
	}
	testkit.EventuallyWithin(t, e2eWait, "the client of cp-b reaches the VM registered at cp-a", func() bool {
		for i := 0; i < 20; i++ {
			if be, err := call(t.Context(), client); err == nil && be == "vm" {
				return true
			}
		}
		return false
	})

	// The second client's EDS, as cp-c serves it (a client of cp-c).
	cClient := c.xdsClient(t, "client2")
	allToAny(t, cClient)
	// Each VM's endpoint: its address next to the VM port in one
	// socket_address (no braces between).
	vmAt := func(ip string) *regexp.Regexp {
		return regexp.MustCompile(regexp.QuoteMeta(`"`+ip+`"`) + `[^{}]{0,60}\b` + fmt.Sprint(vm.port) + `\b`)
	}
	vm1At, vm2At := vmAt("127.0.0.1"), vmAt("127.0.0.2")
	edsAt := func(m *mesh, pod string) string {
		_, body := httpGet(t, "http://"+m.d.HTTPAddr()+"/debug/config_dump?proxy="+url.QueryEscape("sidecar~127.0.0.1~"+pod+".default~default.svc.cluster.local"))
		return body
	}
	hasVM := func(body string) bool {
		return vm1At.MatchString(body) && vm2At.MatchString(body)
	}
	testkit.EventuallyWithin(t, e2eWait, "both VMs in cp-c's EDS for client2", func() bool { return hasVM(edsAt(c, "client2")) })

	// Watch cp-c's EDS for client2 the whole time the VM moves.
	var polls, misses atomic.Int64
	stopPoll := make(chan struct{})
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		for {
			select {
			case <-stopPoll:
				return
			default:
			}
			polls.Add(1)
			if !hasVM(edsAt(c, "client2")) {
				misses.Add(1)
			}
			time.Sleep(20 * time.Millisecond) // poll interval, not synchronisation
		}
	}()
	vm1.Close()
	vmClient(t, b, "127.0.0.1", "vm-1")
	for _, m := range []*mesh{a, b, c} {
		testkit.EventuallyWithin(t, e2eWait, "vm-1 owned by cp-b on "+m.d.HTTPAddr(), func() bool { return owners(t, m)["vm-127.0.0.1"] == "cp-b" })
	}
	time.Sleep(replicaGrace + time.Second) // past the grace period of a's disconnect: what is checked is that nothing was removed
	close(stopPoll)
	<-polled
	if misses.Load() != 0 || polls.Load() < 10 {
		t.Fatalf("cp-c's EDS for client2 lacked a VM in %d of %d polls during the move", misses.Load(), polls.Load())
	}
	t.Logf("move a→b: the VM stayed in cp-c's EDS in all %d polls", polls.Load())
	if o := owners(t, c); o["vm-127.0.0.1"] != "cp-b" || o["vm-127.0.0.2"] != "cp-a" {
		t.Fatalf("owners after the move: %v", o)
	}

	// cp-a crashes: its gossip stops without a leave, then its listeners.
	if err := a.d.Cluster().Shutdown(false); err != nil {
		t.Fatal(err)
	}
	crashed := time.Now()
	a.stop()
	for _, m := range []*mesh{b, c} {
		if o := owners(t, m); o["vm-127.0.0.2"] == "" || o["vm-127.0.0.1"] != "cp-b" {
			t.Fatalf("right after cp-a's crash: %v", o)
		}
	}
	var seenDead time.Duration
	testkit.EventuallyWithin(t, e2eWait, "cp-b and cp-c see cp-a gone", func() bool {
		seenDead = time.Since(crashed)
		return len(clusterz(t, b).Members) == 2 && len(clusterz(t, c).Members) == 2
	})
	for _, m := range []*mesh{b, c} {
		if o := owners(t, m); o["vm-127.0.0.2"] == "" {
			t.Fatalf("vm-2 lost when cp-a's death was seen: %v", o)
		}
	}
	var removed time.Duration
	testkit.EventuallyWithin(t, e2eWait+replicaGrace, "vm-2 (never reconnected) removed by a survivor", func() bool {
		removed = time.Since(crashed)
		_, inB := owners(t, b)["vm-127.0.0.2"]
		_, inC := owners(t, c)["vm-127.0.0.2"]
		return !inB && !inC
	})
	if removed < seenDead+replicaGrace-500*time.Millisecond {
		t.Fatalf("vm-2 removed %v after the crash, death seen after %v: before the grace period %v", removed, seenDead, replicaGrace)
	}
	t.Logf("cp-a killed: death seen after %v, vm-2 removed after %v", seenDead.Round(time.Millisecond), removed.Round(time.Millisecond))
	if o := owners(t, c); o["vm-127.0.0.1"] != "cp-b" {
		t.Fatalf("vm-1 (connected to cp-b) after the crash: %v", o)
	}
	testkit.EventuallyWithin(t, e2eWait, "client of cp-b still reaches the VM", func() bool {
		for i := 0; i < 20; i++ {
			if be, err := call(t.Context(), client); err == nil && be == "vm" {
				return true
			}
		}
		return false
	})
}

// allToAny waits until cc's calls succeed (any backend).
func allToAny(t *testing.T, cc *grpc.ClientConn) {
	t.Helper()
	testkit.EventuallyWithin(t, e2eWait, "client calls succeed", func() bool {
		_, err := call(t.Context(), cc)
		return err == nil
	})
}
