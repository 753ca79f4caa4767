package ctl

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/baremesh/baremesh/core/testkit"
	"github.com/baremesh/baremesh/internal/version"
)

const (
	reviewsID = "sidecar~10.10.0.11~reviews-vm-1.bookinfo~bookinfo.svc.cluster.local"
	ratingsID = "sidecar~10.10.0.21~ratings-vm-1.bookinfo~bookinfo.svc.cluster.local"
	nackMsg   = "Error adding/updating listener(s) 0.0.0.0_9080: duplicate filter chain match"
)

// TestDaemon runs every daemon verb against a real baremeshd serving the
// example mesh to two real ADS clients, one of which NACKs its listeners.
// With -update it records the daemon's answers under testdata/daemon for
// TestGolden.
func TestDaemon(t *testing.T) {
	d, conf := startExample(t)
	base := "http://" + d.HTTPAddr()
	connectProxy(t, d.XDSAddr(), reviewsID, nil)
	connectProxy(t, d.XDSAddr(), ratingsID, map[string]string{typeLDS: nackMsg})

	out := pollCtl(t, base, func(s string) bool {
		return strings.Contains(s, "reviews-vm-1.bookinfo") && strings.Contains(s, "NACKED") &&
			strings.Count(s, "SYNCED") >= 7 // 4 for reviews, CDS/EDS/RDS for ratings
	}, "proxy-status")
	for _, want := range []string{"NAME", "CDS", "LDS", "EDS", "RDS", "ratings-vm-1.bookinfo LDS NACKED", nackMsg} {
		if !strings.Contains(out, want) {
			t.Errorf("proxy-status lacks %q:\n%s", want, out)
		}
	}
	t.Logf("proxy-status:\n%s", out)

	code, out, errs := run(base, time.Time{}, "proxy-status", "reviews-vm-1.bookinfo")
	if code != 0 || !strings.Contains(out, reviewsID) || !strings.Contains(out, "SYNCED") {
		t.Errorf("proxy-status PROXY: exit %d\n%s%s", code, out, errs)
	}
	code, _, errs = run(base, time.Time{}, "proxy-status", "nobody")
	if code != 1 || !strings.Contains(errs, `no connected proxy "nobody"`) || !strings.Contains(errs, "reviews-vm-1.bookinfo") {
		t.Errorf("proxy-status of an unknown proxy: exit %d, %s", code, errs)
	}

	code, out, errs = run(base, time.Time{}, "proxy-config", "clusters", "reviews-vm-1.bookinfo", "--fqdn", "reviews.bookinfo.mesh")
	if code != 0 || !strings.Contains(out, "reviews.bookinfo.mesh   9080   v3") || strings.Contains(out, "ratings") {
		t.Errorf("proxy-config clusters --fqdn: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = run(base, time.Time{}, "proxy-config", "endpoints", reviewsID, "--port", "9080", "--subset", "v2")
	if code != 0 || !strings.Contains(out, "10.10.0.12:9080") || strings.Contains(out, "10.10.0.11") {
		t.Errorf("proxy-config endpoints --subset v2: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = run(base, time.Time{}, "proxy-config", "routes", "reviews-vm-1.bookinfo", "-o", "json")
	if code != 0 || !strings.Contains(out, `"virtualHosts"`) {
		t.Errorf("proxy-config routes -o json: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = run(base, time.Time{}, "proxy-config", "listeners", "reviews-vm-1.bookinfo", "-o", "yaml")
	if code != 0 || !strings.Contains(out, "filterChains:") {
		t.Errorf("proxy-config listeners -o yaml: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = run(base, time.Time{}, "version")
	if code != 0 || out != "client version: "+version.Version+"\nbaremeshd version: "+version.Version+" ("+base+")\n" {
		t.Errorf("version: exit %d\n%s%s", code, out, errs)
	}

	// analyze --daemon reads the daemon's config: clean, then a VirtualService
	// to a subset nobody defines, reported with its file and line.
	code, out, errs = run(base, time.Time{}, "analyze", "--daemon", base)
	if code != 0 || !strings.Contains(out, "No validation issues found when analyzing baremeshd at "+base) {
		t.Errorf("analyze --daemon: exit %d\n%s%s", code, out, errs)
	}
	vs := "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: ratings, namespace: bookinfo}\nspec:\n  hosts: [ratings.bookinfo.mesh]\n  http: [{route: [{destination: {host: ratings.bookinfo.mesh, subset: v9}}]}]\n"
	if err := os.WriteFile(filepath.Join(conf, "zz-ratings-vs.yaml"), []byte(vs), 0o644); err != nil {
		t.Fatal(err)
	}
	want := `Error [IST0101] (VirtualService bookinfo/ratings ` + filepath.Join(conf, "zz-ratings-vs.yaml") + `:1) Referenced host+subset in destinationrule not found: "ratings.bookinfo.mesh+v9"`
	testkit.EventuallyWithin(t, 20*time.Second, "analyze --use-daemon to report "+want, func() bool {
		code, out, errs = run(base, time.Time{}, "--daemon", base, "analyze", "--use-daemon")
		return code == ExitAnalyzeIssues && strings.TrimSpace(out) == want
	})

	if *update { // record the daemon's answers for the golden tests
		rec := filepath.Join("testdata", "daemon")
		if err := os.MkdirAll(rec, 0o755); err != nil {
			t.Fatal(err)
		}
		for file, path := range map[string]string{"syncz.json": "/debug/syncz", "config_dump.json": "/debug/config_dump?proxy=" + reviewsID} {
			resp, err := http.Get(base + path)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err := os.WriteFile(filepath.Join(rec, file), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestNoDaemon: every daemon verb says it cannot reach baremeshd, naming
// the address, and exits 1.
func TestNoDaemon(t *testing.T) {
	for _, args := range [][]string{{"proxy-status"}, {"proxy-config", "all", "x"}, {"version"}} {
		code, _, errs := run("http://127.0.0.1:1", time.Time{}, append([]string{"--daemon", "http://127.0.0.1:1"}, args...)...)
		if code != 1 || !strings.Contains(errs, "cannot reach baremeshd") || !strings.Contains(errs, "127.0.0.1:1") {
			t.Errorf("%v: exit %d, %q", args, code, errs)
		}
	}
}

// recorded serves the answers TestDaemon recorded, as the daemon would.
func recorded(t *testing.T) string {
	t.Helper()
	rec := filepath.Join("testdata", "daemon")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/debug/syncz":
			http.ServeFile(w, r, filepath.Join(rec, "syncz.json"))
		case "/debug/config_dump":
			if r.URL.Query().Get("proxy") != reviewsID {
				http.Error(w, "no connected proxy "+r.URL.Query().Get("proxy"), http.StatusNotFound)
				return
			}
			http.ServeFile(w, r, filepath.Join(rec, "config_dump.json"))
		case "/version":
			_, _ = io.WriteString(w, `{"version":"1.2.3"}`)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestGolden renders the recorded daemon answers with a fixed clock and
// compares with testdata/*.golden (-update rewrites them).
func TestGolden(t *testing.T) {
	base := recorded(t)
	// The clock: 90 s after the newest time in the recording.
	now := newestTime(t, filepath.Join("testdata", "daemon", "syncz.json")).Add(90 * time.Second)
	for _, tc := range []struct {
		golden string
		args   []string
	}{
		{"proxy-status.golden", []string{"proxy-status"}},
		{"proxy-status-one.golden", []string{"proxy-status", "ratings-vm-1.bookinfo"}},
		{"clusters.golden", []string{"proxy-config", "clusters", "reviews-vm-1.bookinfo"}},
		{"clusters-outbound-9080.golden", []string{"proxy-config", "cluster", "reviews-vm-1.bookinfo", "--direction", "outbound", "--port", "9080"}},
		{"listeners.golden", []string{"proxy-config", "listeners", "reviews-vm-1.bookinfo"}},
		{"routes.golden", []string{"proxy-config", "routes", "reviews-vm-1.bookinfo"}},
		{"endpoints.golden", []string{"proxy-config", "endpoints", "reviews-vm-1.bookinfo", "--fqdn", "reviews.bookinfo.mesh"}},
		{"all.golden", []string{"proxy-config", "all", "reviews-vm-1.bookinfo"}},
		{"clusters-json.golden", []string{"proxy-config", "clusters", "reviews-vm-1.bookinfo", "--fqdn", "ratings.bookinfo.mesh", "-o", "json"}},
		{"help.golden", []string{"--help"}},
		{"version.golden", []string{"version"}},
		{"completion-bash.golden", []string{"completion", "bash"}},
		{"completion-zsh.golden", []string{"completion", "zsh"}},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			code, out, errs := run(base, now, tc.args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			writeGolden(t, tc.golden, strings.ReplaceAll(strings.ReplaceAll(out, version.Version, "VERSION"), base, "URL"))
		})
	}
}

func newestTime(t *testing.T, path string) time.Time {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run TestDaemon with -update)", err)
	}
	var newest time.Time
	for _, f := range strings.FieldsFunc(string(b), func(r rune) bool { return r == '"' }) {
		if ts, err := time.Parse(time.RFC3339Nano, f); err == nil && ts.After(newest) {
			newest = ts
		}
	}
	return newest
}

// TestUsage: --help lists every verb and exits 0; unknown commands and
// flags list what exists and exit 2; every verb's --help exits 0.
func TestUsage(t *testing.T) {
	code, out, _ := run("", time.Time{}, "--help")
	if code != 0 {
		t.Errorf("--help: exit %d", code)
	}
	for _, v := range Verbs {
		if !strings.Contains(out, "\n  "+v.Name+" ") {
			t.Errorf("--help lacks %s:\n%s", v.Name, out)
		}
		if code, _, errs := run("", time.Time{}, v.Name, "--help"); code != 0 {
			t.Errorf("%s --help: exit %d: %s", v.Name, code, errs)
		}
		if code, _, errs := run("", time.Time{}, "help", v.Name); code != 0 {
			t.Errorf("help %s: exit %d: %s", v.Name, code, errs)
		}
	}
	code, _, errs := run("", time.Time{}, "proxy-stat")
	if code != 2 || !strings.Contains(errs, `unknown command "proxy-stat"`) || !strings.Contains(errs, "proxy-status, proxy-config") {
		t.Errorf("unknown command: exit %d, %q", code, errs)
	}
	code, out, _ = run("", time.Time{}, "--version")
	if code != 0 || out != "baremeshctl "+version.Version+"\n" {
		t.Errorf("--version: exit %d, %q", code, out)
	}
	code, _, errs = run("", time.Time{}, "proxy-config", "bogus", "x")
	if code != 2 || !strings.Contains(errs, "choose clusters, listeners, routes, endpoints, secrets or all") {
		t.Errorf("proxy-config bogus: exit %d, %q", code, errs)
	}
}

// TestAnalyzeDir: the directory with known mistakes gives istioctl's
// codes with file:line and exit 79; --failure-threshold and
// --output-threshold work; the example mesh is clean.
func TestAnalyzeDir(t *testing.T) {
	code, out, errs := run("", time.Time{}, "analyze", "testdata/analyze/mistakes")
	if code != ExitAnalyzeIssues {
		t.Errorf("exit %d, want %d: %s", code, ExitAnalyzeIssues, errs)
	}
	writeGolden(t, "analyze-mistakes.golden", out)
	code, out, _ = run("", time.Time{}, "analyze", "--output-threshold", "warning", "--failure-threshold", "error", "testdata/analyze/mistakes/gateway.yaml", "testdata/analyze/mistakes/shop.yaml")
	if code != ExitAnalyzeIssues || !strings.HasPrefix(out, "Warning [BM0001] (Gateway shop/shop-gw testdata/analyze/mistakes/gateway.yaml:2)") || strings.Contains(out, "IST0118") {
		t.Errorf("warnings and errors shown, info not: exit %d\n%s", code, out)
	}
	code, out, _ = run("", time.Time{}, "analyze", "--failure-threshold", "error", "testdata/analyze/clean")
	if code != 0 || !strings.HasPrefix(out, "Warning [BM0001] (Gateway shop/shop-gw testdata/analyze/clean/gateway.yaml:") {
		t.Errorf("a warning below the failure threshold: exit %d\n%s", code, out)
	}
	code, out, _ = run("", time.Time{}, "analyze", "--output-threshold", "warning", "testdata/analyze/mistakes/shop.yaml", "--failure-threshold", "info")
	if code != ExitAnalyzeIssues || strings.Contains(out, "IST0118") {
		t.Errorf("info hidden but failing: exit %d\n%s", code, out)
	}
	code, out, errs = run("", time.Time{}, "analyze", "../../examples/vm-mesh/conf.d")
	if code != 0 || out != "✔ No validation issues found when analyzing ../../examples/vm-mesh/conf.d.\n" {
		t.Errorf("example mesh: exit %d\n%s%s", code, out, errs)
	}
	code, _, errs = run("", time.Time{}, "analyze", "no/such/dir")
	if code != 2 || !strings.Contains(errs, "no/such/dir") {
		t.Errorf("missing dir: exit %d %s", code, errs)
	}
}

// TestBashCompletion sources the bash script in a real bash and asks it
// to complete verbs and subcommands.
func TestBashCompletion(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	_, script, _ := run("", time.Time{}, "completion", "bash")
	for _, tc := range []struct{ line, want string }{
		{"baremeshctl proxy-", "proxy-status proxy-config"},
		{"baremeshctl proxy-config cl", "clusters"},
		{"baremeshctl completion ", "bash zsh"},
		{"baremeshctl token r", "revoke"},
	} {
		words := strings.Fields(tc.line)
		if strings.HasSuffix(tc.line, " ") {
			words = append(words, "")
		}
		var quoted []string
		for _, w := range words {
			quoted = append(quoted, "'"+w+"'")
		}
		sh := script + "\nCOMP_WORDS=(" + strings.Join(quoted, " ") + ")\nCOMP_CWORD=" + strconv.Itoa(len(words)-1) + "\n_baremeshctl\necho \"${COMPREPLY[*]}\"\n"
		out, err := exec.Command(bash, "--norc", "-c", sh).CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != tc.want {
			t.Errorf("%q: got %q (%v), want %q", tc.line, out, err, tc.want)
		}
	}
}
