package chaos

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// CHAOS_PROFILE=DIR keeps profiles of the replicas (their /debug/pprof):
// a CPU profile of each over the fleet's start (CHAOS_PROFILE_SECONDS,
// default 30), and a heap profile (after a GC) of each at every row of
// the table, named after the row, to see what holds memory after a fault.

// profileDir is CHAOS_PROFILE ("" when not profiling).
func profileDir() string { return os.Getenv("CHAOS_PROFILE") }

// profileStart takes a CPU profile of every replica, in the background;
// the returned function waits for them.
func (f *fleet) profileStart() (wait func()) {
	dir := profileDir()
	if dir == "" {
		return func() {}
	}
	secs := os.Getenv("CHAOS_PROFILE_SECONDS")
	if secs == "" {
		secs = "30"
	}
	done := make(chan struct{}, len(f.rs))
	for _, r := range f.rs {
		go func() {
			defer func() { done <- struct{}{} }()
			f.pprof(r, "profile?seconds="+secs, filepath.Join(dir, r.name+"-start.cpu.pb.gz"))
		}()
	}
	return func() {
		for range f.rs {
			<-done
		}
	}
}

// profileHeap saves every replica's heap profile for a row.
func (f *fleet) profileHeap(fault string) {
	dir := profileDir()
	if dir == "" {
		return
	}
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, strings.ToLower(fault))
	for _, r := range f.rs {
		f.pprof(r, "heap?gc=1", filepath.Join(dir, fmt.Sprintf("%02d-%s-%s.heap.pb.gz", len(f.rows), name, r.name)))
		f.pprof(r, "goroutine", filepath.Join(dir, fmt.Sprintf("%02d-%s-%s.goroutine.pb.gz", len(f.rows), name, r.name)))
	}
}

// pprof saves one /debug/pprof/ answer of r to file (a failure is logged:
// profiles are for reading, not checks).
func (f *fleet) pprof(r *replica, what, file string) {
	c := &http.Client{Timeout: 2 * time.Minute, Transport: r.lan.http.Transport}
	resp, err := c.Get("http://" + r.httpAddr() + "/debug/pprof/" + what)
	if err == nil {
		defer resp.Body.Close()
		var out *os.File
		if out, err = os.Create(file); err == nil {
			_, err = io.Copy(out, resp.Body)
			out.Close()
		}
	}
	if err != nil {
		f.t.Logf("profile %s of %s: %v", what, r.name, err)
	}
}
