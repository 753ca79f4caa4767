package workloads

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	networking "istio.io/api/networking/v1alpha3"

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
	state string
}

func newFixture(t testing.TB, grace time.Duration, allowUnauth bool) *fixture {
	f := &fixture{t: t, agg: store.NewAggregate(), own: store.NewMemory(), state: filepath.Join(t.TempDir(), "entries.json")}
	f.files = f.agg.AddSource("file:/conf")
	f.agg.AttachMemory("baremesh", f.own)
	f.files.Synced()
	f.c = f.newController(grace, allowUnauth)
	return f
}

func (f *fixture) newController(grace time.Duration, allowUnauth bool) *Controller {
	c, err := New(Options{Store: f.own, Config: f.agg, OwnSource: "baremesh", Grace: grace, AllowUnauthenticated: allowUnauth,
		StateFile: f.state, Controller: "test", Metrics: NewMetrics(nil)})
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(c.Stop)
	return c
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
	c, ok := f.entry("ns", "reviews-10.0.0.7")
	if !ok {
		t.Fatal("no entry reviews-10.0.0.7")
	}
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

func TestGracePeriod(t *testing.T) {
	f := newFixture(t, 300*time.Millisecond, false)
	f.files.Update([]config.Config{group("ns", "reviews", "rev", false)}, nil)
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
	f.c.Disconnect(p)
	if c, _ := f.entry("ns", "reviews-10.0.0.7"); c.Annotations[AnnotationDisconnectedAt] != "" {
		t.Fatal("marked disconnected while a proxy still holds it")
	}
	f.c.Disconnect(p2)
	c, ok := f.entry("ns", "reviews-10.0.0.7")
	if !ok || c.Annotations[AnnotationDisconnectedAt] == "" || c.Annotations[AnnotationConnectedAt] == "" {
		t.Fatalf("after disconnect: %v %v", ok, c.Annotations)
	}
	// Back inside the grace period: kept, past it, the timer finds it
	// connected and leaves it.
	p3 := proxy("ns", "reviews", "10.0.0.7", "rev")
	if err := f.c.Connect(p3); err != nil {
		t.Fatal(err)
	}
	time.Sleep(400 * time.Millisecond) // let the (stale) grace timer fire: the condition checked is that nothing happens
	if c, ok := f.entry("ns", "reviews-10.0.0.7"); !ok || c.Annotations[AnnotationDisconnectedAt] != "" {
		t.Fatalf("reconnected entry removed or still marked: %v %v", ok, c.Annotations)
	}
	start := time.Now()
	f.c.Disconnect(p3)
	testkit.Eventually(t, "entry removed after the grace period", func() bool { _, ok := f.entry("ns", "reviews-10.0.0.7"); return !ok })
	if el := time.Since(start); el < 250*time.Millisecond {
		t.Fatalf("removed after %v, before the 300ms grace", el)
	}
}

func TestTwoProxiesSameAddress(t *testing.T) {
	f := newFixture(t, 100*time.Millisecond, false)
	f.files.Update([]config.Config{group("ns", "reviews", "rev", false)}, nil)
	a, b := proxy("ns", "reviews", "10.0.0.7", "rev"), proxy("ns", "reviews", "10.0.0.7", "rev")
	b.Labels = map[string]string{"version": "v2"}
	if err := f.c.Connect(a); err != nil {
		t.Fatal(err)
	}
	if err := f.c.Connect(b); err != nil {
		t.Fatal(err)
	}
	if n := len(f.agg.List(config.WorkloadEntry, "ns")); n != 1 {
		t.Fatalf("%d entries for one address, want 1", n)
	}
	c, _ := f.entry("ns", "reviews-10.0.0.7")
	if v := c.Spec.(*networking.WorkloadEntry).Labels["version"]; v != "v2" {
		t.Fatalf("the latest connection's labels win: %q", v)
	}
	f.c.Disconnect(a)
	time.Sleep(200 * time.Millisecond) // past the grace period: what is checked is that b's entry is still there
	if _, ok := f.entry("ns", "reviews-10.0.0.7"); !ok {
		t.Fatal("entry removed while the second proxy is connected")
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
	healthy := func() bool {
		c, _ := f.entry("ns", "reviews-10.0.0.7")
		return c.Annotations[model.AnnotationHealth] != model.Unhealthy
	}
	f.c.Report(p, HealthType, "connection refused", true)
	if healthy() || f.c.Registrations()[0].Health != "unhealthy" || f.c.Registrations()[0].HealthDetail != "connection refused" {
		t.Fatalf("after an unhealthy report: %+v", f.c.Registrations())
	}
	f.c.Report(p, "type.googleapis.com/istio.mesh.v1alpha1.ProxyConfig", "", false) // not health: ignored
	if healthy() {
		t.Fatal("a report of another type changed the health")
	}
	f.c.Report(p, LegacyHealthType, "", false)
	if !healthy() || f.c.Registrations()[0].Health != "healthy" {
		t.Fatalf("after a healthy report: %+v", f.c.Registrations())
	}
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
	if _, ok := f.entry("ns", "reviews-10.0.0.7"); ok {
		t.Fatal("entry outlived its group")
	}
	f.c.Disconnect(p) // after the entry is gone: nothing to do, no panic
}

func TestRestartKeepsEntries(t *testing.T) {
	f := newFixture(t, 500*time.Millisecond, false)
	f.files.Update([]config.Config{group("ns", "reviews", "rev", false)}, nil)
	p := proxy("ns", "reviews", "10.0.0.7", "rev")
	if err := f.c.Connect(p); err != nil {
		t.Fatal(err)
	}
	gone := proxy("ns", "reviews", "10.0.0.9", "rev")
	if err := f.c.Connect(gone); err != nil {
		t.Fatal(err)
	}
	f.c.Report(p, HealthType, "down", true)
	f.c.Disconnect(gone) // one marked at shutdown ...
	f.c.Stop()           // ... the daemon stops; the other connection ends without Disconnect
	// ... and the daemon stays down far longer than the grace period.
	data, err := os.ReadFile(f.state)
	if err != nil {
		t.Fatal(err)
	}
	var st map[string]any
	if err := json.Unmarshal(data, &st); err != nil {
		t.Fatal(err)
	}
	for _, e := range st["entries"].([]any) {
		e.(map[string]any)["disconnectedAt"] = time.Now().Add(-time.Hour).Format(time.RFC3339Nano)
	}
	data, _ = json.Marshal(st)
	if err := os.WriteFile(f.state, data, 0o600); err != nil {
		t.Fatal(err)
	}

	// A new daemon: a fresh store, entries served from the state file
	// before the groups are read.
	g := &fixture{t: t, agg: store.NewAggregate(), own: store.NewMemory(), state: f.state}
	g.files = g.agg.AddSource("file:/conf")
	g.agg.AttachMemory("baremesh", g.own)
	g.c = g.newController(500*time.Millisecond, false)
	c, ok := g.entry("ns", "reviews-10.0.0.7")
	if !ok || c.Annotations[model.AnnotationHealth] != model.Unhealthy || c.Annotations[AnnotationDisconnectedAt] == "" {
		t.Fatalf("restored entry: %v %v", ok, c.Annotations)
	}
	time.Sleep(100 * time.Millisecond) // well inside the new grace period: what is checked is that nothing was removed
	if len(g.agg.List(config.WorkloadEntry, "ns")) != 2 {
		t.Fatal("restored entries removed at once: the grace period must run from the restart")
	}
	g.files.Update([]config.Config{group("ns", "reviews", "rev", false)}, nil)
	g.files.Synced()
	g.c.Resync()
	p2 := proxy("ns", "reviews", "10.0.0.7", "rev")
	if err := g.c.Connect(p2); err != nil {
		t.Fatal(err)
	}
	// The proxy that came back stays; the one that did not is removed
	// after the grace period (no stale entry, istio#28743).
	testkit.Eventually(t, "stale entry removed", func() bool { _, ok := g.entry("ns", "reviews-10.0.0.9"); return !ok })
	if _, ok := g.entry("ns", "reviews-10.0.0.7"); !ok {
		t.Fatal("reconnected entry removed")
	}
	if r := g.c.Registrations(); len(r) != 1 || r[0].Health != "unhealthy" {
		t.Fatalf("registrations: %+v", r)
	}
	// A corrupt state file is a clear error.
	if err := os.WriteFile(f.state, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Options{Store: store.NewMemory(), Config: g.agg, StateFile: f.state}); err == nil || !strings.Contains(err.Error(), f.state) {
		t.Fatalf("corrupt state: %v", err)
	}
}
