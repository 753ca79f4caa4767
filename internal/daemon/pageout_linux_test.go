//go:build linux

package daemon

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

// The test binary, like baremeshd, is a Go executable whose package
// initialisation left much of it resident: releasing its pages must
// lower its file-backed resident set.
func TestReleaseStartupPages(t *testing.T) {
	before := fileRSS()
	if before == 0 {
		t.Skip("no RssFile in /proc/self/status")
	}
	covered, err := releaseStartupPages()
	if errors.Is(err, unix.EINVAL) {
		t.Skipf("the kernel refuses MADV_PAGEOUT (before Linux 5.4?): %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	after := fileRSS()
	t.Logf("covered %d MB of mappings; resident file pages %d -> %d MB", covered>>20, before>>20, after>>20)
	if covered == 0 {
		t.Fatal("no mapping of the executable found in /proc/self/maps")
	}
	if after >= before {
		t.Fatalf("resident file pages %d bytes after, %d before: nothing released", after, before)
	}
}
