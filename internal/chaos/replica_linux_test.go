package chaos

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/baremesh/baremesh/core/cluster"
	"github.com/baremesh/baremesh/nodeagent/nstest"
)

// replica is one baremeshd process in its own namespace, its state
// directory on a tmpfs of its own.
type replica struct {
	name, ip string
	ns       *nstest.NS
	lan      *lan
	bin      string
	dir      string // config, logs
	state    string // the tmpfs
	cfg      string
	logs     int

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

const (
	gossipPort = 7946
	httpPort   = 15014
	tlsPort    = 15012
	stateSize  = "64m"
)

func newReplica(t *testing.T, l *lan, bin string, i int, conf, keyFile string, seeds []string) *replica {
	t.Helper()
	ns, ip := l.attach(t, i)
	r := &replica{name: fmt.Sprintf("cp-%c", 'a'+i), ip: ip, ns: ns, lan: l, bin: bin, dir: t.TempDir()}
	r.state = filepath.Join(r.dir, "state")
	if err := os.Mkdir(r.state, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+stateSize+",mode=0700", "tmpfs", r.state).CombinedOutput(); err != nil {
		t.Fatalf("mount a tmpfs on %s: %v: %s", r.state, err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", r.state).Run() })
	// Every proxy dials from the hub's one address: the per-peer stream
	// cap is raised above the fleet.
	cfg := fmt.Sprintf(`configDirs: [%s]
meshConfig: %s
xdsAddr: 127.0.0.1:15010
httpAddr: %s:%d
allowRemoteHTTP: true
tlsAddr: %s:%d
stateDir: %s
registrationGrace: 10s
maxStreamsPerPeer: 20000
logLevel: info
cluster: {name: %s, bind: "%s:%d", seeds: [%s], keyFile: %s}
`, conf, filepath.Join(r.dir, "none.yaml"), ip, httpPort, ip, tlsPort, r.state, r.name, ip, gossipPort, strings.Join(seeds, ", "), keyFile)
	r.cfg = filepath.Join(r.dir, "baremesh.yaml")
	if err := os.WriteFile(r.cfg, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		r.kill()
		// CHAOS_LOGS=DIR keeps the replicas' logs (the temporary
		// directory goes after this).
		if keep := os.Getenv("CHAOS_LOGS"); keep != "" {
			for n := 1; n <= r.logs; n++ {
				if b, err := os.ReadFile(filepath.Join(r.dir, fmt.Sprintf("log-%d.txt", n))); err == nil {
					_ = os.WriteFile(filepath.Join(keep, fmt.Sprintf("%s-%s-log-%d.txt", t.Name(), r.name, n)), b, 0o644)
				}
			}
		}
	})
	return r
}

func (r *replica) tlsAddr() string  { return r.ip + ":" + strconv.Itoa(tlsPort) }
func (r *replica) httpAddr() string { return r.ip + ":" + strconv.Itoa(httpPort) }

// start runs baremeshd in the replica's namespace (not waiting for it).
func (r *replica) start(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.logs++
	logf, err := os.Create(filepath.Join(r.dir, fmt.Sprintf("log-%d.txt", r.logs)))
	if err != nil {
		t.Fatal(err)
	}
	r.cmd = exec.Command("ip", "netns", "exec", r.ns.Name, r.bin, "--config", r.cfg)
	r.cmd.Stdout, r.cmd.Stderr = logf, logf
	if err := r.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", r.name, err)
	}
	done := make(chan struct{})
	r.done = done
	go func(c *exec.Cmd) { _ = c.Wait(); logf.Close(); close(done) }(r.cmd)
}

// waitReady waits until the replica answers /readyz; a replica that
// exits or is not ready within 2 minutes fails the test with its log's
// end.
func (r *replica) waitReady(t *testing.T) {
	t.Helper()
	start := time.Now()
	for {
		if !r.running() {
			t.Fatalf("%s exited:\n%s", r.name, r.tail())
		}
		resp, err := r.lan.http.Get("http://" + r.httpAddr() + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Since(start) > 2*time.Minute {
			t.Fatalf("%s not ready after 2 minutes (last: %v); its log ends:\n%s", r.name, err, r.tail())
		}
		time.Sleep(100 * time.Millisecond) // polling the process, not synchronisation
	}
}

func (r *replica) running() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done == nil {
		return false
	}
	select {
	case <-r.done:
		return false
	default:
		return true
	}
}

// kill sends SIGKILL (ip netns exec execs baremeshd: the pid is its) and
// waits for the exit.
func (r *replica) kill() {
	r.mu.Lock()
	cmd, done := r.cmd, r.done
	r.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
}

func (r *replica) pid() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil || r.cmd.Process == nil {
		return 0
	}
	return r.cmd.Process.Pid
}

// tail is the end of the current log, for a failure message.
func (r *replica) tail() string {
	b, _ := os.ReadFile(filepath.Join(r.dir, fmt.Sprintf("log-%d.txt", r.logs)))
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-30):], "\n")
}

// status reads /debug/clusterz.
func (r *replica) status() (cluster.Status, error) {
	var s cluster.Status
	resp, err := r.lan.http.Get("http://" + r.httpAddr() + "/debug/clusterz")
	if err != nil {
		return s, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return s, fmt.Errorf("%s: clusterz: %s: %s", r.name, resp.Status, b)
	}
	return s, json.NewDecoder(resp.Body).Decode(&s)
}

// usage is the process's resident memory (MB), the Go heap in use (MB:
// live objects and garbage not yet collected; RSS also holds memory the
// runtime has freed but not yet returned) and goroutines.
type usage struct {
	rssMB, heapMB float64
	goroutines    int
}

func (r *replica) usage() usage {
	var u usage
	if f, err := os.Open(fmt.Sprintf("/proc/%d/status", r.pid())); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if kb, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
				n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(kb), " kB"))
				u.rssMB = float64(n) / 1024
			}
		}
		f.Close()
	}
	u.goroutines = int(r.metric("go_goroutines"))
	u.heapMB = r.metric("go_memstats_heap_inuse_bytes") / (1 << 20)
	return u
}

// metric is the value of an unlabelled metric (-1 if unread).
func (r *replica) metric(name string) float64 {
	resp, err := r.lan.http.Get("http://" + r.httpAddr() + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return -1
}

// stop sends SIGTERM (a clean stop: leave the cluster, drain) and waits
// for the exit; after a minute it kills.
func (r *replica) stop() {
	r.mu.Lock()
	cmd, done := r.cmd, r.done
	r.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(time.Minute):
		r.kill()
	}
}

// exited waits for the process to exit (it was expected to refuse to
// start) and returns its exit status.
func (r *replica) exited(t *testing.T) *os.ProcessState {
	t.Helper()
	r.mu.Lock()
	cmd, done := r.cmd, r.done
	r.mu.Unlock()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatalf("%s did not exit:\n%s", r.name, r.tail())
	}
	return cmd.ProcessState
}
