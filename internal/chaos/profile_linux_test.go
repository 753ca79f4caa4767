package chaos

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
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

// cpuSeconds is the CPU time (user + system) process pid has used so far
// (0 if unread); pid 0 is this test process, which runs every proxy.
func cpuSeconds(pid int) float64 {
	path := "/proc/self/stat"
	if pid > 0 {
		path = fmt.Sprintf("/proc/%d/stat", pid)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	// Fields after the command (which may hold spaces), from field 3:
	// utime and stime are fields 14 and 15, in clock ticks (100 a second
	// on Linux).
	_, rest, ok := strings.Cut(string(b), ") ")
	f := strings.Fields(rest)
	if !ok || len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseFloat(f[11], 64)
	s, _ := strconv.ParseFloat(f[12], 64)
	return (u + s) / 100
}

// cpuSince is what the test process and each replica used since the
// readings in before (cpuNow), as one line for the log.
func (f *fleet) cpuSince(before []float64, wall time.Duration) string {
	now := f.cpuNow()
	var b strings.Builder
	fmt.Fprintf(&b, "over %v: CPU s test process (the proxies) %.1f", wall.Round(100*time.Millisecond), now[0]-before[0])
	for i, r := range f.rs {
		fmt.Fprintf(&b, ", %s %.1f", r.name, now[i+1]-before[i+1])
	}
	if la, err := os.ReadFile("/proc/loadavg"); err == nil {
		fmt.Fprintf(&b, "; load average %s", strings.Join(strings.Fields(string(la))[:3], " "))
	}
	return b.String()
}

// cpuNow reads the test process's and every replica's CPU seconds.
func (f *fleet) cpuNow() []float64 {
	out := []float64{cpuSeconds(0)}
	for _, r := range f.rs {
		out = append(out, cpuSeconds(r.pid()))
	}
	return out
}
