package daemon

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestConfigzPagesAndFilters (issue #30): /debug/configz filters by kind,
// namespace and source, answers a page at a time with the offset of the
// next, and ?all=1 streams every resource in one valid JSON document
// with the same problem lists.
func TestConfigzPagesAndFilters(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "conf.d")
	if err := os.MkdirAll(filepath.Join(dir, "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 25 {
		ns, sub := "a", ""
		if i%5 == 0 {
			ns, sub = "b", "b"
		}
		body := fmt.Sprintf(`apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: se-%02d, namespace: %s}
spec:
  hosts: [se-%02d.example.com]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.%d}]
`, i, ns, i, i+1)
		if err := os.WriteFile(filepath.Join(dir, sub, fmt.Sprintf("se-%02d.yaml", i)), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d, _ := startDaemon(t, dir)
	waitReady(t, d)
	fetch := func(query string) configz {
		t.Helper()
		code, body := get(t, "http://"+d.HTTPAddr()+"/debug/configz"+query)
		var cz configz
		if err := json.Unmarshal([]byte(body), &cz); code != 200 || err != nil {
			t.Fatalf("configz%s: %d %v: %.300s", query, code, err, body)
		}
		return cz
	}
	names := func(cz configz) (out []string) {
		for _, r := range cz.Resources {
			out = append(out, r.Namespace+"/"+r.Name)
		}
		return out
	}
	// Pages of 10: 10, 10, 5, each naming the next offset, none twice.
	seen := map[string]bool{}
	for off, want := range map[int]int{0: 10, 10: 10, 20: 5} {
		cz := fetch(fmt.Sprintf("?kind=ServiceEntry&limit=10&offset=%d", off))
		if len(cz.Resources) != want || cz.Total != 25 {
			t.Fatalf("offset %d: %d resources of %d, want %d of 25", off, len(cz.Resources), cz.Total, want)
		}
		if wantNext := off + 10; (wantNext < 25 && cz.Next != wantNext) || (wantNext >= 25 && cz.Next != 0) {
			t.Errorf("offset %d: next %d", off, cz.Next)
		}
		for _, n := range names(cz) {
			if seen[n] {
				t.Errorf("%s on two pages", n)
			}
			seen[n] = true
		}
	}
	if cz := fetch("?namespace=b"); len(cz.Resources) != 5 || cz.Total != 5 {
		t.Errorf("namespace b: %v", names(cz))
	}
	if cz := fetch("?source=" + filepath.Join(dir, "b")); len(cz.Resources) != 5 || cz.Resources[0].Namespace != "b" {
		t.Errorf("source %s: %v", filepath.Join(dir, "b"), names(cz))
	}
	if cz := fetch("?kind=DestinationRule"); len(cz.Resources) != 0 || cz.Total != 0 {
		t.Errorf("kind DestinationRule: %v", names(cz))
	}
	all := fetch("?all=1&limit=3")
	if len(all.Resources) != 25 || all.Total != 25 || all.Next != 0 || all.Snapshot == nil || all.Rejected == nil {
		t.Errorf("all: %d resources, total %d, next %d, snapshot %v, rejected %v", len(all.Resources), all.Total, all.Next, all.Snapshot, all.Rejected)
	}
	if len(all.Resources) > 0 && (all.Resources[0].Spec == nil || all.Resources[0].Source.File == "") {
		t.Errorf("streamed resource without spec or source: %+v", all.Resources[0])
	}
}
