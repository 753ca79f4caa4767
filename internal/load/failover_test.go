package load

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/baremesh/baremesh/core/testkit"
	"github.com/baremesh/baremesh/xdsserver/xdstype"
)

// TestFailoverKill9 (issue #15; BAREMESH_FAILOVER_PROXIES=500 to run):
// three baremeshd processes in one memberlist cluster on loopback, N
// proxies auto-registered across them (raw ADS streams that move to the
// next replica when theirs ends, as a grpc-go client with several
// servers does), then `kill -9` of one replica. Reported: registrations
// lost on the survivors (target 0), the time until every proxy is
// connected again, and until every registration is owned by a survivor
// on both.
func TestFailoverKill9(t *testing.T) {
	proxies := envInt("BAREMESH_FAILOVER_PROXIES", 0)
	if proxies == 0 {
		t.Skip("set BAREMESH_FAILOVER_PROXIES=500 to run the kill -9 failover measurement (issue #15)")
	}
	raiseNoFile(t)
	conf := t.TempDir()
	writeFile(t, conf, "vm.yaml", vmGroupYAML)
	bin := daemonBinary(t)
	names := []string{"cp-a", "cp-b", "cp-c"}
	ports := freePorts(t, 3)
	var ds []*daemonProc
	for i, name := range names {
		dir := t.TempDir()
		seeds := "[]"
		if i > 0 {
			seeds = fmt.Sprintf("[127.0.0.1:%d]", ports[0])
		}
		cfg := fmt.Sprintf("configDirs: [%s]\nmeshConfig: %s\nxdsAddr: 127.0.0.1:0\nhttpAddr: 127.0.0.1:0\nstateDir: %s\nregistrationGrace: 10s\nallowUnauthenticatedRegistration: true\ncluster: {name: %s, bind: 127.0.0.1:%d, seeds: %s}\n",
			conf, filepath.Join(dir, "none.yaml"), filepath.Join(dir, "state"), name, ports[i], seeds)
		file := filepath.Join(dir, "baremesh.yaml")
		if err := os.WriteFile(file, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		d := runDaemon(t, bin, "--config", file, "--log-level", "info")
		t.Cleanup(d.stop)
		ds = append(ds, d)
	}
	count := func(d *daemonProc, owners ...string) int {
		var page struct {
			Registrations []struct{ Owner string } `json:"registrations"`
		}
		resp, err := http.Get("http://" + d.http + "/debug/registrationz")
		if err != nil {
			return -1
		}
		defer resp.Body.Close()
		if json.NewDecoder(resp.Body).Decode(&page) != nil {
			return -1
		}
		n := 0
		for _, r := range page.Registrations {
			for _, o := range owners {
				if r.Owner == o {
					n++
				}
			}
		}
		return n
	}

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	var connected, moves atomic.Int64
	for i := range proxies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			proxyLoop(ctx, ds, i, &connected, &moves)
		}()
	}
	for _, d := range ds {
		testkit.EventuallyWithin(t, 2*time.Minute, "every proxy registered on every replica", func() bool { return count(d, names...) == proxies })
	}
	victim := ds[0]
	onVictim := count(ds[1], "cp-a")
	killed := time.Now()
	_ = victim.cmd.Process.Kill() // SIGKILL: no leave, no goodbye
	var reconnected time.Duration
	testkit.EventuallyWithin(t, 2*time.Minute, "every proxy connected again", func() bool {
		if connected.Load() == int64(proxies) && moves.Load() >= int64(onVictim) {
			reconnected = time.Since(killed)
			return true
		}
		return false
	})
	testkit.EventuallyWithin(t, 2*time.Minute, "every registration owned by a survivor on both", func() bool {
		return count(ds[1], "cp-b", "cp-c") == proxies && count(ds[2], "cp-b", "cp-c") == proxies
	})
	owned := time.Since(killed)
	// Past the grace period nothing may have gone.
	testkit.EventuallyWithin(t, time.Minute, "the grace period to pass", func() bool { return time.Since(killed) > 12*time.Second })
	lost := proxies - min(count(ds[1], "cp-b", "cp-c"), count(ds[2], "cp-b", "cp-c"))
	t.Logf("kill -9 of cp-a holding %d of %d proxies: lost %d registrations; every proxy reconnected %v after the kill, every registration owned by a survivor on both %v after",
		onVictim, proxies, lost, reconnected.Round(time.Millisecond), owned.Round(time.Millisecond))
	if lost != 0 {
		t.Errorf("%d registrations lost", lost)
	}
}

// proxyLoop is one auto-registering proxy: it holds an ADS stream to one
// replica and moves to the next when the stream ends.
func proxyLoop(ctx context.Context, ds []*daemonProc, i int, connected, moves *atomic.Int64) {
	md, _ := structpb.NewStruct(map[string]any{"AUTO_REGISTER_GROUP": "vm"})
	ip := fmt.Sprintf("10.88.%d.%d", i>>8, i&255)
	node := &corev3.Node{Id: fmt.Sprintf("sidecar~%s~vm-%d.default~default.svc.cluster.local", ip, i), Metadata: md}
	for k := i % len(ds); ctx.Err() == nil; k = (k + 1) % len(ds) {
		cc, err := grpc.NewClient(ds[k].xds, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return
		}
		st, err := discovery.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(ctx)
		if err == nil && st.Send(&discovery.DiscoveryRequest{Node: node, TypeUrl: xdstype.Listener.URL}) == nil {
			if _, err := st.Recv(); err == nil {
				connected.Add(1)
				for {
					if _, err := st.Recv(); err != nil {
						break
					}
				}
				connected.Add(-1)
				if ctx.Err() == nil {
					moves.Add(1)
				}
			}
		}
		cc.Close()
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond): // a reconnect delay, as a real client's backoff
		}
	}
}

// freePorts returns n loopback ports free for TCP and UDP now.
func freePorts(t *testing.T, n int) []int {
	var out []int
	for len(out) < n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p := l.Addr().(*net.TCPAddr).Port
		l.Close()
		u, err := net.ListenPacket("udp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		u.Close()
		out = append(out, p)
	}
	return out
}
