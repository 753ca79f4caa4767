package workloads

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/baremesh/baremesh/core/cluster"
	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/core/store"
	"github.com/baremesh/baremesh/core/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m.Run) }

type fixture struct {
	t     testing.TB
	agg   *store.Aggregate
	files store.Sink
	own   *store.Memory
	c     *Controller
	table *cluster.Table
	state string
	clock *clock
	grace time.Duration
}

// clock is a fixture's time: the table's grace periods and the
// controller's timestamps run on it, so a test passes a grace period by
// moving it (advance), not by waiting one out.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

func newFixture(t testing.TB, grace time.Duration, allowUnauth bool) *fixture {
	f := &fixture{t: t, agg: store.NewAggregate(), own: store.NewMemory(), state: filepath.Join(t.TempDir(), "entries.json"),
		clock: &clock{now: time.Unix(1_700_000_000, 0)}, grace: grace}
	f.files = f.agg.AddSource("file:/conf")
	f.agg.AttachMemory("baremesh", f.own)
	f.files.Update([]config.Config{group(sentinelNS, "s", "s", false)}, nil)
	f.files.Synced()
	f.c = f.newController(grace, allowUnauth)
	return f
}

// newTable starts the fixture's table of one (a real core/cluster table,
// as the daemon's without replicas), on the fixture's clock, reaping
// every few milliseconds.
func (f *fixture) newTable(grace time.Duration) *cluster.Table {
	tbl, err := cluster.New(cluster.Options{Name: "test", Grace: grace, ReapInterval: 5 * time.Millisecond, Now: f.clock.Now})
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { _ = tbl.Shutdown(false) })
	f.table = tbl
	return tbl
}

func (f *fixture) newController(grace time.Duration, allowUnauth bool) *Controller {
	c, err := New(Options{Store: f.own, Config: f.agg, OwnSource: "baremesh", Grace: grace, AllowUnauthenticated: allowUnauth,
		StateFile: f.state, Controller: "test", Metrics: NewMetrics(nil), Registrations: f.newTable(grace), Now: f.clock.Now})
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(c.Stop)
	return c
}

// sentinelNS holds the sentinel entries advance uses.
const sentinelNS = "sentinel"

var sentinelSeq atomic.Int64

// advance moves the clock by d and returns once the table has reaped at
// the new time: a sentinel entry whose grace period ends exactly then is
// gone (one reaper pass judges every record under one lock), so what the
// test checks next in the table is what the table did by then.
func (f *fixture) advance(d time.Duration) {
	f.t.Helper()
	at := f.clock.Now().Add(d)
	f.clock.set(at.Add(-f.grace))
	n := sentinelSeq.Add(1)
	ip := fmt.Sprintf("10.255.%d.%d", n>>8&255, n&255)
	p := proxy(sentinelNS, "s", ip, "s")
	name := EntryName("s", ip, "")
	if err := f.c.Connect(p); err != nil {
		f.t.Fatal(err)
	}
	testkit.Eventually(f.t, "sentinel registered", func() bool { _, ok := f.entry(sentinelNS, name); return ok })
	f.c.Disconnect(p)
	testkit.Eventually(f.t, "sentinel marked disconnected", func() bool {
		c, _ := f.entry(sentinelNS, name)
		return c.Annotations[AnnotationDisconnectedAt] != ""
	})
	f.clock.set(at)
	testkit.Eventually(f.t, "sentinel reaped", func() bool { _, ok := f.entry(sentinelNS, name); return !ok })
}

// waitEntry waits for the table's entry ns/name in the store.
func (f *fixture) waitEntry(ns, name string) config.Config {
	f.t.Helper()
	var c config.Config
	testkit.Eventually(f.t, "entry "+ns+"/"+name, func() bool {
		var ok bool
		c, ok = f.entry(ns, name)
		return ok
	})
	return c
}

// connected reports whether the table holds ns/name connected, and
// whether it holds it at all.
func (f *fixture) connected(ns, name string) (connected, held bool) {
	r, ok := f.table.Get(ns + "/" + name)
	return ok && r.Connected(), ok
}

func group(ns, name, sa string, probe bool) config.Config {
	wg := &networking.WorkloadGroup{
		Metadata: &networking.WorkloadGroup_ObjectMeta{Labels: map[string]string{"app": name}, Annotations: map[string]string{"team": "a"}},
		Template: &networking.WorkloadEntry{Ports: map[string]uint32{"http": 8080}, ServiceAccount: sa, Labels: map[string]string{"app": name, "tier": "t"}, Weight: 3},
	}
	if probe {
		wg.Probe = &networking.ReadinessProbe{HealthCheckMethod: &networking.ReadinessProbe_TcpSocket{TcpSocket: &networking.TCPHealthCheckConfig{Port: 8080}}}
	}
	return config.Config{Meta: config.Meta{GVK: config.SchemaFor(config.WorkloadGroup).GVK(), Namespace: ns, Name: name}, Spec: wg}
}

var proxySeq atomic.Int64

func proxy(ns, group, ip, sa string) *model.Proxy {
	p := &model.Proxy{ID: "sidecar~" + ip + "~vm-" + string(rune('a'+proxySeq.Add(1)%26)) + "." + ns + "~" + ns + ".svc.cluster.local", Namespace: ns, IPs: []string{ip},
		Labels: map[string]string{"version": "v1"}, Metadata: map[string]string{MetadataGroup: group},
		Locality: &corev3.Locality{Region: "r", Zone: "z"}}
	if sa != "" {
		p.Identity = &model.Identity{TrustDomain: "cluster.local", Namespace: ns, ServiceAccount: sa, Method: "client-cert"}
	}
	return p
}

func (f *fixture) entry(ns, name string) (config.Config, bool) {
	return f.agg.Get(config.WorkloadEntry, ns, name)
}

func TestRegisterFromTemplate(t *testing.T) {
	f := newFixture(t, time.Minute, false)
	f.files.Update([]config.Config{group("ns", "reviews", "rev", true)}, nil)
	if err := f.c.Connect(proxy("ns", "reviews", "10.0.0.7", "rev")); err != nil {
		t.Fatal(err)
	}
	c := f.waitEntry("ns", "reviews-10.0.0.7")
	we := c.Spec.(*networking.WorkloadEntry)
	if we.Address != "10.0.0.7" || we.Ports["http"] != 8080 || we.ServiceAccount != "rev" || we.Weight != 3 || we.Locality != "r/z" ||
		we.Labels["app"] != "reviews" || we.Labels["tier"] != "t" || we.Labels["version"] != "v1" {
		t.Fatalf("spec: %v", we)
	}
	if c.Labels["app"] != "reviews" || c.Annotations["team"] != "a" || c.Annotations[AnnotationGroup] != "reviews" ||
		c.Annotations[AnnotationController] != "test" || c.Annotations[AnnotationConnectedAt] == "" ||
		c.Annotations[AnnotationHealthChecks] != "true" || c.Annotations[AnnotationDisconnectedAt] != "" {
		t.Fatalf("meta: labels %v annotations %v", c.Labels, c.Annotations)
	}
	if src, _ := f.agg.SourceOf(c.Key()); src != "baremesh" {
		t.Fatalf("source %q", src)
	}
	if got := EntryName("g", "fd00::1", "net1"); got != "g-fd00--1-net1" {
		t.Fatalf("EntryName: %q", got)
	}
}

func TestRefusals(t *testing.T) {
	f := newFixture(t, time.Minute, false)
	f.files.Update([]config.Config{group("ns", "reviews", "rev", false)}, nil)
	for name, tc := range map[string]struct {
		p    *model.Proxy
		want string
	}{
		"no group":        {proxy("ns", "ratings", "10.0.0.1", "rev"), "WorkloadGroup ns/ratings not found"},
		"unauthenticated": {proxy("ns", "reviews", "10.0.0.1", ""), "is not authenticated"},
		"other account":   {proxy("ns", "reviews", "10.0.0.1", "other"), "runs as service account rev"},
	} {
		err := f.c.Connect(tc.p)
		if !IsRefused(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want a refusal with %q", name, err, tc.want)
		}
	}
	if got := f.agg.List(config.WorkloadEntry, ""); len(got) != 0 {
		t.Fatalf("refused proxies registered %d entries", len(got))
	}
	// A proxy without a group is not auto-registration's business.
	p := proxy("ns", "", "10.0.0.1", "")
	if err := f.c.Connect(p); err != nil {
		t.Fatal(err)
	}
	// With the explicit setting, an unauthenticated proxy registers.
	f2 := newFixture(t, time.Minute, true)
	f2.files.Update([]config.Config{group("ns", "reviews", "rev", false)}, nil)
	if err := f2.c.Connect(proxy("ns", "reviews", "10.0.0.1", "")); err != nil {
		t.Fatal(err)
	}
}

// TestGracePeriod: an entry stays while any of its proxies is connected,
// is marked disconnected when the last goes, stays through a reconnect
// past the end of the grace period, and goes once a grace period passes
// without one, not before. The fixture's clock moves; nothing sleeps.
func TestGracePeriod(t *testing.T) {
	const grace = time.Minute
	f := newFixture(t, grace, false)
	f.files.Update([]config.Config{group("ns", "reviews", "rev", false)}, nil)
	const name = "reviews-10.0.0.7"
	p := proxy("ns", "reviews", "10.0.0.7", "rev")
	if err := f.c.Connect(p); err != nil {
		t.Fatal(err)
	}
	// Reconnect inside the grace period: the new stream arrives before the
	// old one's end is seen (istio#43950 on one replica); the entry stays.
	p2 := proxy("ns", "reviews", "10.0.0.7", "rev")
	if err := f.c.Connect(p2); err != nil {
		t.Fatal(err)
	}
	f.waitEntry("ns", name)
	f.c.Disconnect(p)
	f.advance(2 * grace)
	if conn, held := f.connected("ns", name); !conn || !held {
		t.Fatalf("after one of two proxies left: connected %v, held %v; want connected while a proxy still holds it", conn, held)
	}
	f.c.Disconnect(p2)
	testkit.Eventually(t, "entry marked disconnected", func() bool {
		c, ok := f.entry("ns", name)
		return ok && c.Annotations[AnnotationDisconnectedAt] != "" && c.Annotations[AnnotationConnectedAt] != ""
	})
	// Back inside the grace period: kept, and still there after the
	// grace period of the disconnect has passed.
	p3 := proxy("ns", "reviews", "10.0.0.7", "rev")
	if err := f.c.Connect(p3); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "reconnected entry unmarked", func() bool {
		c, ok := f.entry("ns", name)
		return ok && c.Annotations[AnnotationDisconnectedAt] == ""
	})
	f.advance(2 * grace)
	if conn, held := f.connected("ns", name); !conn || !held {
		t.Fatalf("reconnected entry past the grace period: connected %v, held %v", conn, held)
	}
	f.c.Disconnect(p3)
	testkit.Eventually(t, "entry marked disconnected", func() bool {
		c, ok := f.entry("ns", name)
		return ok && c.Annotations[AnnotationDisconnectedAt] != ""
	})
	f.advance(grace - time.Millisecond)
	if _, held := f.connected("ns", name); !held {
		t.Fatal("removed before the grace period ended")
	}
	f.advance(time.Millisecond)
	if _, held := f.connected("ns", name); held {
		t.Fatal("still held once the grace period ended")
	}
	testkit.Eventually(t, "entry removed after the grace period", func() bool { _, ok := f.entry("ns", name); return !ok })
}

func TestTwoProxiesSameAddress(t *testing.T) {
	const grace = time.Minute
	f := newFixture(t, grace, false)
	f.files.Update([]config.Config{group("ns", "reviews", "rev", false)}, nil)
	a, b := proxy("ns", "reviews", "10.0.0.7", "rev"), proxy("ns", "reviews", "10.0.0.7", "rev")
	b.Labels = map[string]string{"version": "v2"}
	if err := f.c.Connect(a); err != nil {
		t.Fatal(err)
	}
	if err := f.c.Connect(b); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "the latest connection's labels", func() bool {
		c, ok := f.entry("ns", "reviews-10.0.0.7")
		return ok && c.Spec.(*networking.WorkloadEntry).Labels["version"] == "v2"
	})
	if n := len(f.agg.List(config.WorkloadEntry, "ns")); n != 1 {
		t.Fatalf("%d entries for one address, want 1", n)
	}
	f.c.Disconnect(a)
	f.advance(2 * grace)
	if conn, held := f.connected("ns", "reviews-10.0.0.7"); !conn || !held {
		t.Fatalf("after a left, past the grace period: connected %v, held %v; want b's entry connected", conn, held)
	}
	if r := f.c.Registrations(); len(r) != 1 || !r[0].Connected || len(r[0].Proxies) != 1 || r[0].Proxies[0] != b.ID {
		t.Fatalf("registrations: %+v", r)
	}
}

func TestHandWrittenEntryUntouched(t *testing.T) {
	f := newFixture(t, time.Minute, false)
	hand := config.Config{Meta: config.Meta{GVK: config.SchemaFor(config.WorkloadEntry).GVK(), Namespace: "ns", Name: "reviews-10.0.0.7"},
		Spec: &networking.WorkloadEntry{Address: "10.0.0.7", Labels: map[string]string{"hand": "yes"}}}
	f.files.Update([]config.Config{group("ns", "reviews", "rev", false), hand}, nil)
	p := proxy("ns", "reviews", "10.0.0.7", "rev")
	if err := f.c.Connect(p); err != nil {
		t.Fatal(err)
	}
	f.c.Report(p, HealthType, "down", true)
	f.c.Disconnect(p)
	c, _ := f.entry("ns", "reviews-10.0.0.7")
	if c.Spec.(*networking.WorkloadEntry).Labels["hand"] != "yes" || len(c.Annotations) != 0 {
		t.Fatalf("hand-written entry changed: %v", c)
	}
	if len(f.own.List(config.WorkloadEntry, "")) != 0 || len(f.c.Registrations()) != 0 {
		t.Fatal("auto-registration wrote an entry under a hand-written one's name")
	}
}

func TestHealthReports(t *testing.T) {
	f := newFixture(t, time.Minute, false)
	f.files.Update([]config.Config{group("ns", "reviews", "rev", true)}, nil)
	p := proxy("ns", "reviews", "10.0.0.7", "rev")
	if err := f.c.Connect(p); err != nil {
		t.Fatal(err)
	}
	f.waitEntry("ns", "reviews-10.0.0.7")
	healthy := func() bool {
		c, _ := f.entry("ns", "reviews-10.0.0.7")
		return c.Annotations[model.AnnotationHealth] != model.Unhealthy
	}
	health := func() (string, string) {
		r := f.c.Registrations()
		if len(r) != 1 {
			return "", ""
		}
		return r[0].Health, r[0].HealthDetail
	}
	f.c.Report(p, HealthType, "connection refused", true)
	testkit.Eventually(t, "unhealthy after an unhealthy report", func() bool {
		h, d := health()
		return !healthy() && h == "unhealthy" && d == "connection refused"
	})
	f.c.Report(p, "type.googleapis.com/istio.mesh.v1alpha1.ProxyConfig", "", false) // not health: ignored
	if h, _ := health(); healthy() || h != "unhealthy" {
		t.Fatal("a report of another type changed the health")
	}
	f.c.Report(p, LegacyHealthType, "", false)
	testkit.Eventually(t, "healthy after a healthy report", func() bool {
		h, _ := health()
		return healthy() && h == "healthy"
	})
	// From a proxy without a group: ignored.
	other := proxy("ns", "", "10.0.0.8", "rev")
	f.c.Report(other, HealthType, "x", true)
	if len(f.c.Registrations()) != 1 {
		t.Fatal("a report created an entry")
	}
}

func TestGroupChangedAndDeleted(t *testing.T) {
	f := newFixture(t, time.Minute, false)
	f.files.Update([]config.Config{group("ns", "reviews", "rev", false)}, nil)
	p := proxy("ns", "reviews", "10.0.0.7", "rev")
	if err := f.c.Connect(p); err != nil {
		t.Fatal(err)
	}
	f.waitEntry("ns", "reviews-10.0.0.7")
	changed := group("ns", "reviews", "rev", false)
	changed.Spec.(*networking.WorkloadGroup).Template.Ports = map[string]uint32{"http": 9090}
	f.files.Update([]config.Config{changed}, nil)
	f.c.Resync()
	c, _ := f.entry("ns", "reviews-10.0.0.7")
	if port := c.Spec.(*networking.WorkloadEntry).Ports["http"]; port != 9090 {
		t.Fatalf("entry did not follow the template: port %d", port)
	}
	f.files.Update(nil, []config.Key{changed.Key()})
	f.c.Resync()
	testkit.Eventually(t, "entry removed with its group", func() bool { _, ok := f.entry("ns", "reviews-10.0.0.7"); return !ok })
	f.c.Disconnect(p) // after the entry is gone: nothing to do, no panic
}

// TestRestartKeepsEntries: a daemon stops with two entries (one
// connected and unhealthy, one disconnected) and stays down far longer
// than the grace period. The next start serves both from the state file
// before the groups are read, gives each a full grace period from the
// restart, keeps the one whose proxy comes back (with its health) and
// removes the other (no stale entry, istio#28743).
func TestRestartKeepsEntries(t *testing.T) {
	const grace = time.Minute
	f := newFixture(t, grace, false)
	f.files.Update([]config.Config{group("ns", "reviews", "rev", false)}, nil)
	p := proxy("ns", "reviews", "10.0.0.7", "rev")
	if err := f.c.Connect(p); err != nil {
		t.Fatal(err)
	}
	gone := proxy("ns", "reviews", "10.0.0.9", "rev")
	if err := f.c.Connect(gone); err != nil {
		t.Fatal(err)
	}
	f.waitEntry("ns", "reviews-10.0.0.9")
	f.c.Report(p, HealthType, "down", true)
	f.c.Disconnect(gone) // one marked at shutdown ...
	testkit.Eventually(t, "the state persisted", func() bool {
		data, _ := os.ReadFile(f.state)
		return regexp.MustCompile(`"healthy":\s*false`).Match(data) && regexp.MustCompile(`"d":\s*[1-9]`).Match(data)
	})
	f.c.Stop() // ... the daemon stops; the other connection ends without Disconnect
	_ = f.table.Shutdown(false)
	// ... and the daemon stays down far longer than the grace period.
	data, err := os.ReadFile(f.state)
	if err != nil {
		t.Fatal(err)
	}
	var st map[string]any
	if err := json.Unmarshal(data, &st); err != nil {
		t.Fatal(err)
	}
	for _, r := range st["records"].([]any) {
		r.(map[string]any)["d"] = f.clock.Now().Add(-time.Hour).UnixNano()
	}
	data, _ = json.Marshal(st)
	if err := os.WriteFile(f.state, data, 0o600); err != nil {
		t.Fatal(err)
	}
	f.clock.set(f.clock.Now().Add(time.Hour))

	// A new daemon: a fresh store and table, entries served from the
	// state file before the groups are read.
	g := &fixture{t: t, agg: store.NewAggregate(), own: store.NewMemory(), state: f.state, clock: f.clock, grace: grace}
	g.files = g.agg.AddSource("file:/conf")
	g.agg.AttachMemory("baremesh", g.own)
	g.files.Update([]config.Config{group(sentinelNS, "s", "s", false)}, nil)
	g.c = g.newController(grace, false)
	testkit.Eventually(t, "restored entries served, disconnected, before the groups are read", func() bool {
		c, ok := g.entry("ns", "reviews-10.0.0.7")
		c9, ok9 := g.entry("ns", "reviews-10.0.0.9")
		return ok && ok9 && c.Annotations[model.AnnotationHealth] == model.Unhealthy && c.Annotations[AnnotationDisconnectedAt] != "" &&
			c9.Annotations[AnnotationDisconnectedAt] != ""
	})
	g.advance(grace - time.Millisecond)
	if _, held := g.connected("ns", "reviews-10.0.0.9"); !held {
		t.Fatal("restored entry removed within the grace period: it must run from the restart")
	}
	g.files.Update([]config.Config{group("ns", "reviews", "rev", false)}, nil)
	g.files.Synced()
	g.c.Resync()
	p2 := proxy("ns", "reviews", "10.0.0.7", "rev")
	if err := g.c.Connect(p2); err != nil {
		t.Fatal(err)
	}
	g.advance(time.Millisecond)
	testkit.Eventually(t, "stale entry removed", func() bool { _, ok := g.entry("ns", "reviews-10.0.0.9"); return !ok })
	if conn, _ := g.connected("ns", "reviews-10.0.0.7"); !conn {
		t.Fatal("reconnected entry not connected")
	}
	if r := g.c.Registrations(); len(r) != 1 || r[0].Health != "unhealthy" {
		t.Fatalf("registrations: %+v", r)
	}
	// A corrupt state file is a clear error.
	if err := os.WriteFile(f.state, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Options{Store: store.NewMemory(), Config: g.agg, StateFile: f.state, Registrations: g.newTable(grace)}); err == nil || !strings.Contains(err.Error(), f.state) {
		t.Fatalf("corrupt state: %v", err)
	}
}

// TestStateOfOneReplicaBeforeRestores: a state file written before the
// one lifecycle (a daemon without replicas kept "entries", not the
// table's records) is restored into the table: its entry is served as it
// was built, waits a grace period from the start for its proxy, and goes
// without one.
func TestStateOfOneReplicaBeforeRestores(t *testing.T) {
	const grace = time.Minute
	f := &fixture{t: t, agg: store.NewAggregate(), own: store.NewMemory(), state: filepath.Join(t.TempDir(), "entries.json"),
		clock: &clock{now: time.Unix(1_700_000_000, 0)}, grace: grace}
	old := `{"version": 1, "entries": [{"namespace": "ns", "name": "reviews-10.0.0.7", "group": "reviews", "address": "10.0.0.7",
	  "connectedAt": "2023-11-14T00:00:00Z", "disconnectedAt": "2023-11-14T01:00:00Z", "healthy": false, "healthDetail": "down",
	  "built": {"labels": {"app": "reviews"}, "annotations": {"istio.io/autoRegistrationGroup": "reviews", "baremesh.io/health": "unhealthy"},
	            "spec": {"address": "10.0.0.7", "ports": {"http": 8080}, "serviceAccount": "rev"}}}]}`
	if err := os.WriteFile(f.state, []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	f.files = f.agg.AddSource("file:/conf")
	f.agg.AttachMemory("baremesh", f.own)
	f.files.Update([]config.Config{group(sentinelNS, "s", "s", false)}, nil)
	f.c = f.newController(grace, false)
	c := f.waitEntry("ns", "reviews-10.0.0.7")
	if we := c.Spec.(*networking.WorkloadEntry); we.Address != "10.0.0.7" || we.Ports["http"] != 8080 || c.Annotations[model.AnnotationHealth] != model.Unhealthy {
		t.Fatalf("restored entry: %v %v", we, c.Annotations)
	}
	if r := f.c.Registrations(); len(r) != 1 || r[0].Health != "unhealthy" || r[0].Owner != "test" {
		t.Fatalf("registrations: %+v", r)
	}
	testkit.Eventually(t, "restored entry marked disconnected as of the start", func() bool {
		c, _ := f.entry("ns", "reviews-10.0.0.7")
		return c.Annotations[AnnotationDisconnectedAt] == f.clock.Now().UTC().Format(time.RFC3339Nano)
	})
	f.advance(grace - time.Millisecond)
	if _, held := f.connected("ns", "reviews-10.0.0.7"); !held {
		t.Fatal("restored entry removed within the grace period of the start")
	}
	f.advance(time.Millisecond)
	testkit.Eventually(t, "entry removed: no proxy came back", func() bool { _, ok := f.entry("ns", "reviews-10.0.0.7"); return !ok })
}

// TestHealthReporterJoins: a health reporter's stream (baremesh-agent
// beside an Envoy) joins its proxy's entry without changing its fields,
// keeps it connected after the proxy's stream ends, and its reports
// count; first to connect, it makes the entry, which the proxy's
// connection then fills in.
func TestHealthReporterJoins(t *testing.T) {
	f := newFixture(t, time.Minute, false)
	f.files.Update([]config.Config{group("ns", "reviews", "rev", false)}, nil)
	const name = "reviews-10.0.0.7"
	labels := func() string {
		c, ok := f.entry("ns", name)
		if !ok {
			return ""
		}
		return c.Spec.(*networking.WorkloadEntry).GetLabels()["version"]
	}
	envoy := proxy("ns", "reviews", "10.0.0.7", "rev")
	reporter := proxy("ns", "reviews", "10.0.0.7", "rev")
	reporter.Labels = map[string]string{"version": "agent"}
	reporter.Metadata[MetadataHealthReporter] = "true"
	if err := f.c.Connect(envoy); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "the proxy's entry", func() bool { return labels() == "v1" })
	if err := f.c.Connect(reporter); err != nil {
		t.Fatal(err)
	}
	f.c.Report(reporter, HealthType, "down", true)
	testkit.Eventually(t, "the reporter's health", func() bool {
		c, _ := f.entry("ns", name)
		return c.Annotations[model.AnnotationHealth] == model.Unhealthy
	})
	if v := labels(); v != "v1" {
		t.Fatalf("the reporter changed the entry's labels: version %q", v)
	}
	f.c.Disconnect(envoy)
	f.advance(2 * time.Minute)
	if conn, _ := f.connected("ns", name); !conn {
		t.Fatal("entry not connected while the reporter's stream is")
	}

	// A reporter first: it makes the entry; the proxy fills it in.
	second := proxy("ns", "reviews", "10.0.0.8", "rev")
	rep2 := proxy("ns", "reviews", "10.0.0.8", "rev")
	rep2.Labels = map[string]string{"version": "agent"}
	rep2.Metadata[MetadataHealthReporter] = "true"
	if err := f.c.Connect(rep2); err != nil {
		t.Fatal(err)
	}
	f.waitEntry("ns", "reviews-10.0.0.8")
	if err := f.c.Connect(second); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "the proxy's fields", func() bool {
		c, ok := f.entry("ns", "reviews-10.0.0.8")
		return ok && c.Spec.(*networking.WorkloadEntry).GetLabels()["version"] == "v1"
	})
}
