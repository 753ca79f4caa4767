package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/baremesh/baremesh/core/testkit"
)

// TestConfigzPageScale measures /debug/configz over many one-resource
// files (issue #30: with 100,000 a page took 25 s), run by hand:
//
//	BAREMESH_CONFIGZ_FILES=100000 go test -run TestConfigzPageScale -v ./internal/daemon
func TestConfigzPageScale(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("BAREMESH_CONFIGZ_FILES"))
	if n == 0 {
		t.Skip("set BAREMESH_CONFIGZ_FILES=N")
	}
	dir := filepath.Join(t.TempDir(), "conf.d")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		body := fmt.Sprintf("apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: s%d, namespace: ns%d}\nspec:\n  hosts: [s%d.ns%d.mesh]\n  ports: [{number: 80, name: http, protocol: HTTP}]\n  resolution: DNS\n",
			i, i%10, i, i%10)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%06d.yaml", i)), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	d, _ := startDaemon(t, dir)
	testkit.EventuallyWithin(t, 10*time.Minute, "readyz", func() bool { code, _ := get(t, "http://"+d.HTTPAddr()+"/readyz"); return code == 200 })
	t.Logf("%d files: ready in %v", n, time.Since(start).Round(time.Millisecond))
	for _, q := range []string{"", "?offset=50000", "?kind=ServiceEntry&namespace=ns3", "?source=" + filepath.Join(dir, "f0001")} {
		start := time.Now()
		code, body := get(t, "http://"+d.HTTPAddr()+"/debug/configz"+q)
		if code != 200 {
			t.Fatalf("configz%s: %d", q, code)
		}
		t.Logf("configz%s: %d bytes in %v", q, len(body), time.Since(start).Round(time.Millisecond))
	}
}
