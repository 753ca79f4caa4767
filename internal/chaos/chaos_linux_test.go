package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baremesh/baremesh/core/cluster"
	"github.com/baremesh/baremesh/core/identity"
	"github.com/baremesh/baremesh/core/testkit"
	"github.com/baremesh/baremesh/nodeagent/nstest"
)

func TestMain(m *testing.M) { testkit.Main(m.Run) }

const groupYAML = `apiVersion: networking.istio.io/v1
kind: WorkloadGroup
metadata: {name: vm, namespace: default}
spec:
  metadata: {labels: {app: vm}}
  template: {ports: {http: 8080}, serviceAccount: vm}
`

// TestChaos: the fleet under faults, one after another, then
// overlapping (package doc).
// Short form (make test): 60 proxies, a kill loop of 2 kills 10 s apart.
// CHAOS_FULL=1: 5,000 proxies, a kill -9 every 30 s for 5 minutes.
// CHAOS_PROXIES overrides the number of proxies; CHAOS_REPORT=FILE also
// writes the table there.
func TestChaos(t *testing.T) {
	nstest.RequireRoot(t)
	nstest.RequireBinary(t, "iptables")
	full := os.Getenv("CHAOS_FULL") != ""
	proxies, kills, killEvery, deadline := 60, 2, 10*time.Second, 2*time.Minute
	if full {
		proxies, kills, killEvery, deadline = 5000, 10, 30*time.Second, 5*time.Minute
	}
	if s := os.Getenv("CHAOS_PROXIES"); s != "" {
		proxies, _ = strconv.Atoi(s)
	}
	bin := buildDaemon(t)
	cpu0 := cpuSeconds(0)
	f := startFleet(t, []string{bin, bin, bin}, proxies, deadline)
	profiled := f.profileStart()
	rs := f.rs
	f.mint(0)
	cpu := append([]float64{cpu0}, f.cpuNow()[1:]...) // the replicas: since their start
	f.converge("start", time.Now())
	t.Logf("start: %s", f.cpuSince(cpu, f.rows[0].took))
	profiled()
	f.base = f.rows[0].use

	// 1. Partition cp-c from the two others longer than the grace period
	// (the survivors write its entries off), then heal.
	f.mint(1)
	partition(t, rs[2], rs[:2], true)
	cut := time.Now()
	testkit.EventuallyWithin(t, time.Minute, "cp-a and cp-b to write cp-c's entries off", func() bool {
		s, err := rs[0].status()
		if err != nil {
			return false
		}
		for _, e := range s.Entries {
			if e.Owner == rs[2].name && e.Connected {
				return false
			}
		}
		return len(s.Members) == 2
	})
	testkit.EventuallyWithin(t, time.Minute, "past the grace period", func() bool { return time.Since(cut) > 12*time.Second })
	partition(t, rs[2], rs[:2], false)
	f.converge("partition cp-c 12 s, heal", time.Now())

	// 2. kill -9 loop: a replica killed every killEvery, started again at
	// once (its proxies move to the others meanwhile).
	f.spread()
	f.mint(2)
	loop := time.Now()
	for k := range kills {
		v := rs[k%3]
		v.kill()
		v.start(t)
		v.waitReady(t)
		next := loop.Add(time.Duration(k+1) * killEvery)
		testkit.EventuallyWithin(t, killEvery+time.Minute, "the next kill", func() bool { return time.Now().After(next) })
	}
	f.converge(fmt.Sprintf("kill -9 loop: %d kills, %v apart", kills, killEvery), time.Now())

	// 3. cp-b's state disk full while registrations change (the proxies
	// of the replica holding most move on a kill), then freed.
	f.spread()
	f.mint(0)
	failed0 := rs[1].metric(saveFailures)
	free := fillState(f, rs[1])
	v := f.busiest(rs[0], rs[2])
	v.kill()
	v.start(t)
	v.waitReady(t)
	failedSave(f, rs[1], failed0)
	free()
	f.converge(fmt.Sprintf("cp-b's state disk full (%s kill -9), freed", v.name), time.Now())
	testkit.EventuallyWithin(t, time.Minute, "cp-b's state file to hold every registration again", func() bool {
		return savedRecords(rs[1].state) == proxies
	})

	// 4. All three restarted at once (kill -9, start).
	f.spread()
	f.mint(1)
	var kw sync.WaitGroup
	for _, r := range rs {
		kw.Add(1)
		go func() { defer kw.Done(); r.kill() }()
	}
	kw.Wait()
	for _, r := range rs {
		r.start(t)
	}
	for _, r := range rs {
		r.waitReady(t)
	}
	f.converge("kill -9 all three, start all", time.Now())

	// 5-7. Faults overlapping (overlap_linux_test.go).
	f.partitionDuringKills(min(kills, 4))
	f.diskFullDuringPartition()
	f.restartAllDiskFull()

	report := f.table(proxies)
	t.Log("\n" + report)
	if file := os.Getenv("CHAOS_REPORT"); file != "" {
		_ = os.WriteFile(file, []byte(report), 0o644)
	}
	for _, row := range f.rows {
		if !row.converged || row.lost+row.dup+row.stale+row.tokensLost+row.caLost > 0 {
			t.Errorf("%s: converged=%v lost=%d duplicate=%d stale=%d tokens lost=%d CA lost=%d", row.fault, row.converged, row.lost, row.dup, row.stale, row.tokensLost, row.caLost)
		}
	}
}

// spread moves proxies from the replicas holding more than their share
// to those holding less (after kills and restarts the proxies pile up on
// the replicas that stayed up), and waits for the fleet to converge: a
// row of its own.
func (f *fleet) spread() {
	f.t.Helper()
	share := (len(f.proxies) + len(f.rs) - 1) / len(f.rs)
	on := make([][]*proxy, len(f.rs))
	for _, p := range f.proxies {
		if at := p.at.Load(); at > 0 {
			on[at-1] = append(on[at-1], p)
		}
	}
	var surplus []*proxy
	for k := range on {
		if len(on[k]) > share {
			surplus = append(surplus, on[k][share:]...)
		}
	}
	moved := 0
	for k := range on {
		for n := len(on[k]); n < share && len(surplus) > 0; n++ {
			surplus[0].moveTo(k)
			surplus = surplus[1:]
			moved++
		}
	}
	if moved > 0 {
		f.converge(fmt.Sprintf("spread: %d proxies moved", moved), time.Now())
	}
}

// busiest is the replica among rs holding the most proxies' streams.
func (f *fleet) busiest(rs ...*replica) *replica {
	best, most := rs[0], -1
	for _, r := range rs {
		n := 0
		for _, p := range f.proxies {
			if at := p.at.Load(); at > 0 && f.rs[at-1] == r {
				n++
			}
		}
		if n > most {
			best, most = r, n
		}
	}
	return best
}

// savedRecords is the number of live records in a replica's state file
// (-1 if it cannot be read).
func savedRecords(state string) int {
	b, err := os.ReadFile(filepath.Join(state, "workloads", "entries.json"))
	if err != nil {
		return -1
	}
	var s struct {
		Records []cluster.Record `json:"records"`
	}
	if json.Unmarshal(b, &s) != nil {
		return -1
	}
	n := 0
	for _, r := range s.Records {
		if !r.Deleted {
			n++
		}
	}
	return n
}

// startFleet starts three replicas (bins[i] for replica i) in their
// namespaces, the config file's ticker and the proxies, spread across
// the replicas.
func startFleet(t *testing.T, bins []string, proxies int, deadline time.Duration) *fleet {
	t.Helper()
	l := newLAN(t)
	conf := filepath.Join(t.TempDir(), "conf.d")
	if err := os.Mkdir(conf, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(conf, "vm.yaml"), []byte(groupYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeTick(conf, 0); err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "cluster.key")
	if err := os.WriteFile(keyFile, []byte("MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="), 0o600); err != nil {
		t.Fatal(err)
	}
	var rs []*replica
	for i := range 3 {
		var seeds []string
		for j := range 3 {
			if j != i {
				seeds = append(seeds, fmt.Sprintf("%s.%d:%d", subnet, 10+j, gossipPort))
			}
		}
		rs = append(rs, newReplica(t, l, bins[i], i, conf, keyFile, seeds))
	}
	for _, r := range rs {
		r.start(t)
	}
	for _, r := range rs {
		r.waitReady(t)
	}
	// One CA for the three (the cluster shares it).
	var root []byte
	testkit.EventuallyWithin(t, time.Minute, "one CA root on every replica", func() bool {
		root = nil
		for _, r := range rs {
			b, err := os.ReadFile(filepath.Join(r.state, "ca", identity.RootCertFile))
			if err != nil || root != nil && !bytes.Equal(b, root) {
				return false
			}
			root = b
		}
		return true
	})
	creds, _ := proxyCreds(t, rs[0].state, 20)

	f := &fleet{t: t, rs: rs, root: root, deadline: deadline, conf: conf}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	wg.Add(1)
	go func() { // the config file, changed every second
		defer wg.Done()
		for ctx.Err() == nil {
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
				n := f.tick.Load() + 1
				if err := writeTick(conf, n); err == nil {
					f.tick.Store(n)
				}
			}
		}
	}()
	for i := range proxies {
		p := &proxy{i: i, ip: fmt.Sprintf("10.9.%d.%d", i/250, i%250+1)}
		f.proxies = append(f.proxies, p)
		wg.Add(1)
		go func() { defer wg.Done(); p.run(ctx, rs, l, creds[i%len(creds)]) }()
	}

	return f
}

// buildDaemon builds this tree's baremeshd.
func buildDaemon(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "baremeshd")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/baremesh/baremesh/cmd/baremeshd").CombinedOutput(); err != nil {
		t.Fatalf("go build baremeshd: %v\n%s", err, out)
	}
	return bin
}

// fleet is what the faults are measured on.
type fleet struct {
	t        *testing.T
	rs       []*replica
	proxies  []*proxy
	root     []byte
	tick     atomic.Int64
	tokens   []string // IDs of the tokens minted
	conf     string   // the config directory
	deadline time.Duration
	rows     []row
	base     []usage
}

type row struct {
	fault                                string
	converged                            bool
	took                                 time.Duration
	lost, dup, stale, tokensLost, caLost int
	unread                               int // replicas whose table could not be read
	use                                  []usage
}

// mint makes a join token on replica i (its token file, as baremeshctl
// does); every replica must hold it from then on.
func (f *fleet) mint(i int) {
	f.t.Helper()
	_, rec, err := (&identity.TokenStore{Dir: filepath.Join(f.rs[i].state, "tokens")}).Create(identity.TokenSpec{Namespace: "default", ServiceAccount: "vm", TTL: time.Hour})
	if err != nil {
		f.t.Fatalf("token on %s: %v", f.rs[i].name, err)
	}
	f.tokens = append(f.tokens, rec.ID)
}

// converge waits until the fleet agrees (every replica sees three
// members and holds one live, connected entry per proxy, owned by the
// replica its proxy holds a stream to; every proxy has the config of the
// tick current at the call or later; every token and the CA on every
// replica), then records a row.
func (f *fleet) converge(fault string, from time.Time) {
	f.t.Helper()
	tick0 := f.tick.Load()
	var r row
	for {
		r = f.measure(tick0)
		if r.converged || time.Since(from) > f.deadline {
			break
		}
		// Polling the fleet, not synchronisation; a big fleet's tables
		// are megabytes: less often.
		time.Sleep(time.Duration(250+len(f.proxies)/5) * time.Millisecond)
	}
	r.fault, r.took = fault, time.Since(from)
	for _, x := range f.rs {
		r.use = append(r.use, x.usage())
	}
	f.profileHeap(fault)
	f.rows = append(f.rows, r)
	f.t.Logf("%s: converged=%v in %v; lost %d, duplicate %d, stale %d, tokens lost %d, CA lost %d, tables unread %d",
		fault, r.converged, r.took.Round(10*time.Millisecond), r.lost, r.dup, r.stale, r.tokensLost, r.caLost, r.unread)
	if !r.converged {
		for _, x := range f.rs {
			f.t.Logf("%s's log:\n%s", x.name, x.tail())
		}
	}
}

// measure counts, as of now, what is lost (a proxy's entry missing on
// some replica), duplicated (an entry of no proxy), stale (disconnected,
// or owned elsewhere than where its proxy is), tokens and CAs missing.
func (f *fleet) measure(tick0 int64) row {
	var r row
	want := map[string]*proxy{}
	ok := true
	for _, p := range f.proxies {
		want[p.key()] = p
		if p.at.Load() == 0 || p.tick.Load() < tick0 {
			ok = false
		}
	}
	for _, x := range f.rs {
		s, err := x.status()
		if err != nil {
			r.unread++ // counted as nothing else: not known
			ok = false
			continue
		}
		if len(s.Members) != len(f.rs) {
			ok = false
		}
		seen, stale := 0, 0
		for _, e := range s.Entries {
			p := want[e.Key]
			if p == nil {
				r.dup = max(r.dup, 1)
				continue
			}
			seen++
			at := p.at.Load()
			if !e.Connected || at == 0 || e.Owner != f.rs[at-1].name {
				stale++
			}
		}
		r.dup = max(r.dup, len(s.Entries)-seen)
		r.lost = max(r.lost, len(want)-seen)
		r.stale = max(r.stale, stale)
		list, err := (&identity.TokenStore{Dir: filepath.Join(x.state, "tokens")}).List()
		have := map[string]bool{}
		for _, tr := range list {
			have[tr.ID] = true
		}
		for _, id := range f.tokens {
			if err != nil || !have[id] {
				r.tokensLost++
			}
		}
		if b, err := os.ReadFile(filepath.Join(x.state, "ca", identity.RootCertFile)); err != nil || !bytes.Equal(b, f.root) {
			r.caLost++
		}
	}
	r.converged = ok && r.lost+r.dup+r.stale+r.tokensLost+r.caLost == 0
	return r
}

// table is the chaos table.
func (f *fleet) table(proxies int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "chaos: 3 replicas, %d proxies on the TLS port, config changed every second\n", proxies)
	fmt.Fprintf(&b, "%-56s %-9s %8s %5s %5s %5s %7s %3s  %-15s %-15s %s\n", "fault", "converged", "took", "lost", "dup", "stale", "tokens", "CA", "RSS MB a/b/c", "heap MB a/b/c", "goroutines a/b/c")
	for _, r := range f.rows {
		var rss, heap, gs []string
		for _, u := range r.use {
			rss = append(rss, fmt.Sprintf("%.0f", u.rssMB))
			heap = append(heap, fmt.Sprintf("%.0f", u.heapMB))
			gs = append(gs, strconv.Itoa(u.goroutines))
		}
		conv := fmt.Sprint(r.converged)
		if r.unread > 0 {
			conv += fmt.Sprintf(" (%d tables unread)", r.unread)
		}
		fmt.Fprintf(&b, "%-56s %-9s %8s %5d %5d %5d %7d %3d  %-15s %-15s %s\n", r.fault, conv, r.took.Round(100*time.Millisecond),
			r.lost, r.dup, r.stale, r.tokensLost, r.caLost, strings.Join(rss, "/"), strings.Join(heap, "/"), strings.Join(gs, "/"))
	}
	return b.String()
}
