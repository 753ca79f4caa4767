package daemon

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/baremesh/baremesh/core/testkit"
)

// Issue #11 item 1: a FIFO in a config directory at start-up used to keep
// the daemon from ever becoming ready or stopping. Now the daemon is
// ready, the FIFO is a problem on /debug/configz, and it stops.
func TestFIFOInConfigDir(t *testing.T) {
	dir := webConfDir(t, "8080")
	pipe := filepath.Join(dir, "pipe.yaml")
	if err := syscall.Mkfifo(pipe, 0o644); err != nil {
		t.Fatal(err)
	}
	d, _ := startDaemon(t, dir) // its cleanup fails the test unless Run returns within 10 s of cancel
	waitReady(t, d)
	testkit.Eventually(t, "FIFO on configz", func() bool {
		for _, p := range configzOf(t, d).Rejected {
			if p.Origin == pipe && strings.Contains(p.Error, "FIFO") {
				return true
			}
		}
		return false
	})
	if cz := configzOf(t, d); len(cz.Resources) != 1 {
		t.Fatalf("resources = %+v", cz.Resources)
	}
}
