package ctl

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// copyDir copies the config files of src into a new temporary directory.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

func edit(t *testing.T, path, old, nu string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), old) {
		t.Fatalf("%s has no %q", path, old)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(string(b), old, nu, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}

const newSE = `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: details, namespace: bookinfo}
spec:
  hosts: [details.bookinfo.mesh]
  ports: [{number: 9080, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.10.0.31}]
`

// TestDiff runs baremeshctl diff against a real baremeshd with two real
// ADS clients: an unchanged copy shows no change (exit 0); a weight change
// and a new ServiceEntry show per proxy and type what would be added and
// changed, field by field (exit 1, golden); --proxy narrows to one; a bad
// file is refused with file:line (exit 2); nothing is pushed (the proxies'
// sent versions stay) and the daemon's config stays.
func TestDiff(t *testing.T) {
	d, conf := startExample(t)
	base := "http://" + d.HTTPAddr()
	connectProxy(t, d.XDSAddr(), reviewsID, nil)
	connectProxy(t, d.XDSAddr(), ratingsID, nil)
	before := pollCtl(t, base, func(s string) bool { return strings.Count(s, "SYNCED") == 4 }, "proxy-status", "reviews-vm-1.bookinfo")
	_, dumpBefore, _ := run(base, time.Time{}, "proxy-config", "all", "reviews-vm-1.bookinfo", "-o", "json")

	same := copyDir(t, conf)
	code, out, errs := run(base, time.Time{}, "diff", same)
	if code != 0 || !strings.Contains(out, "reviews-vm-1.bookinfo: no change") || !strings.Contains(out, "0 of 2 connected proxies") {
		t.Errorf("unchanged copy: exit %d\n%s%s", code, out, errs)
	}

	weights := copyDir(t, conf)
	edit(t, filepath.Join(weights, "reviews.yaml"), "weight: 80", "weight: 50")
	edit(t, filepath.Join(weights, "reviews.yaml"), "weight: 20", "weight: 50")
	code, out, errs = run(base, time.Time{}, "diff", weights, "--proxy", "reviews-vm-1.bookinfo")
	if code != 1 || strings.Contains(out, "ratings-vm-1") {
		t.Errorf("weight change: exit %d\n%s%s", code, out, errs)
	}
	writeGolden(t, "diff-weights.golden", out)

	newSvc := copyDir(t, conf)
	if err := os.WriteFile(filepath.Join(newSvc, "details.yaml"), []byte(newSE), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs = run(base, time.Time{}, "diff", newSvc)
	if code != 1 || !strings.Contains(out, "CDS  + outbound|9080||details.bookinfo.mesh") || !strings.Contains(out, "EDS  + outbound|9080||details.bookinfo.mesh") ||
		!strings.Contains(out, "2 of 2 connected proxies") {
		t.Errorf("new ServiceEntry: exit %d\n%s%s", code, out, errs)
	}
	writeGolden(t, "diff-new-service.golden", out)

	bad := copyDir(t, conf)
	edit(t, filepath.Join(bad, "reviews.yaml"), "weight: 80", "weight: 70")
	code, out, errs = run(base, time.Time{}, "diff", bad)
	if code != 2 || !strings.Contains(errs, filepath.Join(bad, "reviews.yaml")+":") || !strings.Contains(errs, "add up to 90") {
		t.Errorf("bad file: exit %d\n%s%s", code, out, errs)
	}

	// Nothing was pushed: the proxy's state and config are as before.
	after := pollCtl(t, base, func(string) bool { return true }, "proxy-status", "reviews-vm-1.bookinfo")
	// The table without its SINCE column (ages grow while the test runs:
	// a second between the two reads failed it on a busy machine).
	strip := func(s string) string { return sinceCol.ReplaceAllString(s[strings.Index(s, "TYPE "):], "$1") }
	if strip(after) != strip(before) {
		t.Errorf("proxy state changed after diff:\n%s\nbefore:\n%s", after, before)
	}
	if _, dumpAfter, _ := run(base, time.Time{}, "proxy-config", "all", "reviews-vm-1.bookinfo", "-o", "json"); dumpAfter != dumpBefore {
		t.Error("the proxy's config changed after diff")
	}
}

// sinceCol is the SINCE cell of a proxy-status type row ("CDS  SYNCED  4s").
var sinceCol = regexp.MustCompile(`(?m)^(\S+[ \t]+\S+[ \t]+)\S+`)
