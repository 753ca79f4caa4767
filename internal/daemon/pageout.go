package daemon

import (
	"os"
	"strconv"
	"strings"
)

// Startup pages (README "Startup pages"). Starting, the daemon runs the
// initialisation of some 500 packages (the protobuf descriptors of
// Envoy's and Istio's APIs, Kubernetes' scheme, the validators) spread
// over its whole executable, and the kernel maps the pages around each
// one faulted in: 56-58 MB of the 110 MB binary were resident within
// 40 ms of the start and stayed so, a quarter of the RSS at 2,000
// proxies. Once the first snapshot is built, baremeshd asks the kernel
// to reclaim them; what it then runs faults its pages back in (26-30 MB
// after a full push to 2,000 proxies). A page still mapped by another
// process stays. cmd/baremeshd calls it (not Run: a test process runs
// many daemons, and its pages are its own).

// ReleaseStartupPages releases the executable's pages (pageout_linux.go)
// and logs the file-backed resident set before and after.
func (d *Daemon) ReleaseStartupPages() {
	before := fileRSS()
	covered, err := releaseStartupPages()
	if err != nil {
		d.log.Info("startup pages kept", "reason", err)
		return
	}
	d.log.Info("startup pages released", "mappedMB", covered>>20, "residentFileMBBefore", before>>20, "residentFileMBAfter", fileRSS()>>20)
}

// fileRSS is this process's file-backed resident set in bytes (RssFile
// of /proc/self/status), or 0 where there is none to read.
func fileRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for l := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(l, "RssFile:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
