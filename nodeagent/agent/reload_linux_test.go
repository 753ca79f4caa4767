package agent

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/baremesh/baremesh/core/testkit"
	"github.com/baremesh/baremesh/nodeagent/iptables"
	"github.com/baremesh/baremesh/nodeagent/nstest"
)

// countingRunner counts the restores of the real runner it wraps.
type countingRunner struct {
	iptables.Runner
	restores atomic.Int64
}

func (c *countingRunner) Restore(ctx context.Context, f iptables.Family, payload string) error {
	c.restores.Add(1)
	return c.Runner.Restore(ctx, f, payload)
}

// syncBuffer is a log destination safe for the agent's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// reloadAgent is an agent started from a config file, as the command
// starts it, with its restores counted and its notifications recorded.
type reloadAgent struct {
	t       *testing.T
	a       *Agent
	path    string
	addr    string
	runner  *countingRunner
	logs    *syncBuffer
	level   *slog.LevelVar
	hup     chan os.Signal // Options.Reloads
	mu      sync.Mutex
	notices []string
	cancel  context.CancelFunc
	errc    chan error
}

func startReloadAgent(t *testing.T, config string) *reloadAgent {
	t.Helper()
	r := &reloadAgent{t: t, path: filepath.Join(t.TempDir(), "agent.yaml"), runner: &countingRunner{},
		logs: &syncBuffer{}, level: new(slog.LevelVar), hup: make(chan os.Signal), errc: make(chan error, 1)}
	r.write(config)
	cfg, err := Load(r.path)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: r.level}))
	a, err := New(context.Background(), log, cfg, Options{ConfigPath: r.path, Level: r.level, Reloads: r.hup,
		Notify: func(s string) {
			r.mu.Lock()
			r.notices = append(r.notices, s)
			r.mu.Unlock()
		},
		wrapRunner: func(in iptables.Runner) iptables.Runner { r.runner.Runner = in; return r.runner }})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Listen(); err != nil {
		t.Fatal(err)
	}
	r.a, r.addr = a, a.StatusAddr()
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.errc <- a.Run(ctx) }()
	t.Cleanup(r.stop)
	testkit.Eventually(t, "first pass", func() bool { return a.status().Passes > 0 })
	return r
}

func (r *reloadAgent) stop() {
	if r.cancel != nil {
		r.cancel()
		if err := <-r.errc; err != nil {
			r.t.Errorf("Run: %v", err)
		}
		r.cancel = nil
	}
}

func (r *reloadAgent) write(config string) {
	r.t.Helper()
	if err := os.WriteFile(r.path, []byte(config), 0o600); err != nil {
		r.t.Fatal(err)
	}
}

// reload writes config and reloads, returning the plan and error.
func (r *reloadAgent) reload(config string) (ReloadPlan, error) {
	r.t.Helper()
	r.write(config)
	return r.a.Reload(context.Background())
}

func (r *reloadAgent) mustReload(config string) ReloadPlan {
	r.t.Helper()
	p, err := r.reload(config)
	if err != nil {
		r.t.Fatalf("reload: %v\nconfig:\n%s", err, config)
	}
	return p
}

func (r *reloadAgent) noticesSince(i int) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.notices[i:]...)
}

func (r *reloadAgent) noticeCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.notices)
}

// vmHost is a "VM" namespace linked to a "peer": the proxy's two
// listeners and two apps in the VM, two servers on the peer.
func vmHost(t *testing.T, backend string) (vm, peer *nstest.NS) {
	t.Helper()
	nstest.RequireRoot(t)
	nstest.RequireBinary(t, "iptables-"+backend+"-restore")
	vm, peer = nstest.New(t), nstest.New(t)
	nstest.Link(t, vm, []string{"10.77.0.2/24"}, peer, []string{"10.77.0.1/24", "10.88.0.1/24"})
	vm.Run(t, "ip", "route", "add", "10.88.0.0/24", "via", "10.77.0.1")
	for _, s := range []struct {
		ns         *nstest.NS
		addr, name string
	}{{vm, "0.0.0.0:15001", "proxy-out"}, {vm, "0.0.0.0:15006", "proxy-in"}, {vm, "0.0.0.0:8080", "app8080"},
		{vm, "0.0.0.0:8081", "app8081"}, {peer, "0.0.0.0:9090", "peer9090"}, {peer, "0.0.0.0:5432", "peer5432"}} {
		s.ns.Serve(t, "tcp4", s.addr, s.name, nstest.ServerOptions{})
	}
	return vm, peer
}

func banner(t *testing.T, ns *nstest.NS, addr string) string {
	t.Helper()
	got, err := ns.Banner("tcp4", addr)
	if err != nil {
		t.Fatalf("dial %s from %s: %v", addr, ns.Name, err)
	}
	return got
}

func expectBanner(t *testing.T, ns *nstest.NS, addr, want string) {
	t.Helper()
	if got := banner(t, ns, addr); !strings.HasPrefix(got, want) {
		t.Errorf("dial %s from %s: got %q, want %q...", addr, ns.Name, got, want)
	}
}

// echo writes a line on an open connection and checks the answer.
func echo(t *testing.T, c net.Conn, want string) {
	t.Helper()
	if _, err := c.Write([]byte("ping\n")); err != nil {
		t.Errorf("write on the connection open since before the reload: %v", err)
		return
	}
	if l, err := nstest.ReadLine(c); l != want+" echo ping" {
		t.Errorf("connection open since before the reload: got %q, %v; want %q", l, err, want+" echo ping")
	}
}

// TestReloadAppliesCaptureChange: agent.yaml gains an excluded inbound
// port, an excluded outbound port and an excluded CIDR; a reload puts the new rules in
// force with one atomic restore per family. Connections keep being
// captured while it happens (a client dials all along and every
// connection reaches the proxy), connections open before keep working,
// and new connections to the excluded ports and CIDR go direct.
func TestReloadAppliesCaptureChange(t *testing.T) {
	for _, b := range []string{"nft", "legacy"} {
		t.Run(b, func(t *testing.T) { testReloadAppliesCaptureChange(t, b) })
	}
}

func testReloadAppliesCaptureChange(t *testing.T, backend string) {
	vm, peer := vmHost(t, backend)
	base := "capture: {backend: " + backend + "}\nstatusAddress: 127.0.0.1:0\ninterval: 1h\nnetns: " + vm.Name + "\n"
	r := startReloadAgent(t, base)
	expectBanner(t, peer, "10.77.0.2:8081", "proxy-in orig=10.77.0.2:8081")
	expectBanner(t, vm, "10.77.0.1:5432", "proxy-out orig=10.77.0.1:5432")
	expectBanner(t, vm, "10.88.0.1:9090", "proxy-out orig=10.88.0.1:9090")
	in, err := peer.Dial("tcp4", "10.77.0.2:8081")
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := vm.Dial("tcp4", "10.77.0.1:5432")
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	for _, c := range []net.Conn{in, out} {
		if l, err := nstest.ReadLine(c); !strings.HasPrefix(l, "proxy-") {
			t.Fatalf("before the reload: %q, %v", l, err)
		}
	}

	// A client dials a captured port throughout the reload.
	stop := make(chan struct{})
	var dials, escaped atomic.Int64
	var firstEscape atomic.Value
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			got, err := peer.Banner("tcp4", "10.77.0.2:8080")
			dials.Add(1)
			if err != nil || !strings.HasPrefix(got, "proxy-in orig=10.77.0.2:8080") {
				escaped.Add(1)
				firstEscape.CompareAndSwap(nil, got+" "+errString(err))
			}
		}
	}()
	testkit.Eventually(t, "dials before the reload", func() bool { return dials.Load() >= 20 })
	before, notices := r.runner.restores.Load(), r.noticeCount()
	plan := r.mustReload(strings.Replace(base, "}", ", inboundPortsExclude: [8081], outboundPortsExclude: [5432], outboundIPRangesExclude: [10.88.0.0/24]}", 1))
	restores := r.runner.restores.Load() - before
	after := dials.Load()
	testkit.Eventually(t, "dials after the reload", func() bool { return dials.Load() >= after+20 })
	close(stop)
	wg.Wait()

	if !slices.Equal(plan.Apply, []string{"capture"}) || len(plan.Restart) != 0 {
		t.Errorf("plan = %+v, want capture applied, nothing to restart", plan)
	}
	if restores != 2 {
		t.Errorf("%d restores for the change, want one atomic restore per family (2)", restores)
	}
	if n := escaped.Load(); n > 0 {
		t.Errorf("%d of %d connections dialled during the reload were not captured (first: %v)", n, dials.Load(), firstEscape.Load())
	}
	t.Logf("%d connections dialled across the reload, all captured", dials.Load())
	save := vm.Run(t, "iptables-"+backend+"-save")
	for _, rule := range []string{"--dport 8081 -j RETURN", "--dport 5432 -j RETURN", "-d 10.88.0.0/24 -j RETURN", "-A PREROUTING -j BAREMESH_PREROUTING"} {
		if !strings.Contains(save, rule) {
			t.Errorf("after the reload, no rule with %q:\n%s", rule, save)
		}
	}
	expectBanner(t, peer, "10.77.0.2:8081", "app8081")
	expectBanner(t, vm, "10.77.0.1:5432", "peer5432")
	expectBanner(t, vm, "10.88.0.1:9090", "peer9090")
	expectBanner(t, peer, "10.77.0.2:8080", "proxy-in orig=10.77.0.2:8080")
	expectBanner(t, vm, "10.77.0.1:9090", "proxy-out orig=10.77.0.1:9090")
	echo(t, in, "proxy-in")
	echo(t, out, "proxy-out")

	// systemd saw RELOADING=1 (with the monotonic time) and then READY=1.
	got := r.noticesSince(notices)
	if len(got) != 2 || !strings.HasPrefix(got[0], "RELOADING=1\nMONOTONIC_USEC=") ||
		!strings.HasPrefix(got[1], "READY=1\nSTATUS="+r.path+" loaded at ") || !strings.Contains(got[1], "reload applied capture") {
		t.Errorf("notifications around the reload: %q", got)
	}
	if d, _ := getStatus(t, r.addr); d.State != "Ready" || !strings.Contains(d.reason("config"), "reload applied capture") {
		t.Errorf("status after the reload: %+v", d)
	}
	if !strings.Contains(r.logs.String(), "msg=\"config reloaded\"") {
		t.Errorf("no reload in the log:\n%s", r.logs.String())
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestReloadUnchangedRestoresNothing: a reload of the same file, of the
// same settings written differently, or of settings the rules do not
// depend on makes no iptables-restore.
func TestReloadUnchangedRestoresNothing(t *testing.T) {
	nstest.RequireRoot(t)
	nstest.RequireBinary(t, "iptables-nft-restore")
	ns := nstest.New(t)
	base := "capture: {backend: nft, inboundPortsExclude: [8081]}\nstatusAddress: 127.0.0.1:0\ninterval: 1h\nnetns: " + ns.Name + "\n"
	r := startReloadAgent(t, base)
	if n := r.runner.restores.Load(); n != 2 {
		t.Fatalf("%d restores at start, want 2 (one per family)", n)
	}
	save := func() string { return nftRules(t, ns) }
	rules := save()
	for _, tc := range []struct {
		name, config string
		apply        []string
	}{
		{"same file", base, nil},
		{"same settings, other spelling", "# edited\nnetns: " + ns.Name + "\ninterval: 60m\nstatusAddress: 127.0.0.1:0\ncapture:\n  backend: nft\n  inboundPortsExclude:\n    - 8081\n", nil},
		{"defaults written out", strings.Replace(base, "{backend: nft,", "{backend: nft, mode: REDIRECT, inboundPort: 15006, outboundPort: 15001,", 1), nil},
		{"keepOnStop", strings.Replace(base, "{backend: nft,", "{backend: nft, keepOnStop: true,", 1), []string{"capture"}},
		{"interval and log level", strings.Replace(base, "interval: 1h", "interval: 2h\nlog: {level: debug}", 1), []string{"capture", "interval", "log.level"}},
	} {
		passes := r.a.status().Passes
		plan := r.mustReload(tc.config)
		if !slices.Equal(plan.Apply, tc.apply) {
			t.Errorf("%s: applied %v, want %v", tc.name, plan.Apply, tc.apply)
		}
		if n := r.runner.restores.Load(); n != 2 {
			t.Errorf("%s: %d restores in all, want none after the 2 at start", tc.name, n)
		}
		if p := r.a.status().Passes; p != passes+1 {
			t.Errorf("%s: passes %d -> %d, want one pass per reload", tc.name, passes, p)
		}
	}
	if got := save(); got != rules {
		t.Errorf("rules changed:\n%s\nwant:\n%s", got, rules)
	}
	if r.level.Level() != slog.LevelDebug {
		t.Errorf("log level %v after reloading log.level: debug", r.level.Level())
	}
}

// TestReloadInvalidKeepsRules: a file that does not parse, has an unknown
// field or a bad value is refused: the rules stay as they are (no
// restore), the log names the file, line and field, /status shows it as
// a Warning of the "config" component, and a good file clears it.
func TestReloadInvalidKeepsRules(t *testing.T) {
	nstest.RequireRoot(t)
	nstest.RequireBinary(t, "iptables-nft-restore")
	ns := nstest.New(t)
	base := "statusAddress: 127.0.0.1:0\ninterval: 1h\nnetns: " + ns.Name + "\ncapture:\n  backend: nft\n  inboundPortsExclude: [8081]\n"
	r := startReloadAgent(t, base)
	rules := nftRules(t, ns)
	restores := r.runner.restores.Load()
	for _, tc := range []struct{ name, config, want string }{
		{"not YAML", base + "  outboundPortsExclude: 5432: x\n", ":7: not valid agent YAML: mapping values are not allowed in this context"},
		{"unknown field", base + "  outboundPortsExclud: [5432]\n", ":7: capture.outboundPortsExclud: not valid agent YAML: field outboundPortsExclud not found"},
		{"bad value", base + "  outboundPortsExclude: [5432, 70000]\n", ":7: capture.outboundPortsExclude[1]: port 70000 out of range"},
		{"bad type", strings.Replace(base, "interval: 1h", "interval: soon", 1), ":2: interval: not valid agent YAML: cannot unmarshal"},
	} {
		_, err := r.reload(tc.config)
		want := r.path + tc.want
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: Reload = %v; want ErrConfig with %q", tc.name, err, want)
		}
		if !strings.Contains(r.logs.String(), "reload refused") || !strings.Contains(r.logs.String(), strings.ReplaceAll(want, `"`, `\"`)) {
			t.Errorf("%s: log does not show the refusal with %q:\n%s", tc.name, want, r.logs.String())
		}
		d, _ := getStatus(t, r.addr)
		if d.State != "Warning" || !strings.HasPrefix(d.reason("config"), "Warning: ") || !strings.Contains(d.reason("config"), "last reload refused, running the previous config: ") ||
			!strings.Contains(d.reason("config"), want) {
			t.Errorf("%s: /status = %+v; want the config component's Warning with %q", tc.name, d, want)
		}
		if !strings.HasPrefix(d.reason("capture"), "Ready: ") {
			t.Errorf("%s: capture %q", tc.name, d.reason("capture"))
		}
	}
	if n := r.runner.restores.Load(); n != restores {
		t.Errorf("%d restores for refused configs, want none", n-restores)
	}
	if got := nftRules(t, ns); got != rules {
		t.Errorf("refused configs changed the rules:\n%s\nwant:\n%s", got, rules)
	}
	r.mustReload(base)
	if d, _ := getStatus(t, r.addr); d.State != "Ready" || !strings.HasPrefix(d.reason("config"), "Ready: ") {
		t.Errorf("after a good reload: %+v", d)
	}
}

// nftRules is iptables-nft-save's output in ns without its comments,
// which carry the time of day (two saves a second apart differ in them;
// TestReloadInvalidKeepsRules failed so once).
func nftRules(t *testing.T, ns *nstest.NS) string {
	t.Helper()
	var out []string
	for _, l := range strings.Split(ns.Run(t, "iptables-nft-save"), "\n") {
		if !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
