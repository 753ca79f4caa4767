package load

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"testing"
	"time"
)

// phaseProfile, when BAREMESH_SCALE_PROFILE names a directory, records a
// CPU profile of the daemon (over its /debug/pprof/profile, for secs
// seconds) and of this process (the load client) while one phase of the
// scale scenario runs, and the daemon's heap at the end of it. The
// returned function ends the phase. Without the variable it does nothing.
func phaseProfile(tb testing.TB, d *daemonProc, mode Mode, phase string, secs int) func() {
	dir := os.Getenv("BAREMESH_SCALE_PROFILE")
	if dir == "" || d.http == "" {
		return func() {}
	}
	name := func(what string) string { return filepath.Join(dir, fmt.Sprintf("%s-%s-%s.pprof", mode, phase, what)) }
	done := make(chan struct{})
	go func() {
		defer close(done)
		fetch(tb, fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", d.http, secs), name("daemon-cpu"))
	}()
	cf, err := os.Create(name("client-cpu"))
	if err != nil {
		tb.Fatal(err)
	}
	client := pprof.StartCPUProfile(cf) == nil // fails under -cpuprofile
	return func() {
		if client {
			pprof.StopCPUProfile()
		}
		cf.Close()
		fetch(tb, fmt.Sprintf("http://%s/debug/pprof/heap", d.http), name("daemon-heap"))
		select {
		case <-done:
		case <-time.After(time.Duration(secs+10) * time.Second):
			tb.Logf("daemon CPU profile of %s did not finish", phase)
		}
	}
}

func fetch(tb testing.TB, url, file string) {
	resp, err := http.Get(url)
	if err != nil {
		tb.Logf("profile %s: %v", url, err)
		return
	}
	defer resp.Body.Close()
	f, err := os.Create(file)
	if err != nil {
		tb.Logf("profile: %v", err)
		return
	}
	defer f.Close()
	_, _ = io.Copy(f, resp.Body)
}
