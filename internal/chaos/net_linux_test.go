package chaos

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/baremesh/baremesh/nodeagent/nstest"
)

// lan is the test's network: a hub namespace holding a bridge, and one
// namespace per replica with a veth into it. The test's own clients
// (proxies, HTTP checks) dial from the hub, through dialers: goroutines
// each on an OS thread kept in the hub namespace. (A dial through
// nstest's Do takes a thread of its own for as long as the connect
// lasts: 5,000 proxies connecting at once made the test process run
// 3,300 threads.)
type lan struct {
	hub   *nstest.NS
	http  *http.Client
	dials chan dialReq
}

type dialReq struct {
	network, addr string
	done          chan dialRes
}

type dialRes struct {
	c   net.Conn
	err error
}

// dialers is how many connects may be in flight at once.
const dialers = 64

const subnet = "10.213.7"

func newLAN(t *testing.T) *lan {
	t.Helper()
	hub := nstest.New(t)
	hub.Run(t, "ip", "link", "add", "br0", "type", "bridge")
	hub.Run(t, "ip", "addr", "add", subnet+".1/24", "dev", "br0")
	hub.Run(t, "ip", "link", "set", "br0", "up")
	l := &lan{hub: hub, dials: make(chan dialReq)}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range dialers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = hub.Do(func() error {
				for {
					select {
					case <-stop:
						return nil
					case r := <-l.dials:
						c, err := net.DialTimeout(r.network, r.addr, 3*time.Second)
						r.done <- dialRes{c, err}
					}
				}
			})
		}()
	}
	t.Cleanup(func() { close(stop); wg.Wait() })
	// A big fleet's table is megabytes.
	l.http = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: l.dial, MaxIdleConnsPerHost: 4}}
	return l
}

// dial opens a TCP connection from the hub.
func (l *lan) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	r := dialReq{network: network, addr: addr, done: make(chan dialRes, 1)}
	select {
	case l.dials <- r:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	res := <-r.done
	return res.c, res.err
}

// attach makes a namespace for replica i with address subnet.(10+i).
func (l *lan) attach(t *testing.T, i int) (*nstest.NS, string) {
	t.Helper()
	ns := nstest.New(t)
	peer := fmt.Sprintf("r%d", i)
	if out, err := exec.Command("ip", "link", "add", peer, "netns", l.hub.Name, "type", "veth", "peer", "name", "eth0", "netns", ns.Name).CombinedOutput(); err != nil {
		t.Fatalf("veth for replica %d: %v: %s", i, err, out)
	}
	l.hub.Run(t, "ip", "link", "set", peer, "master", "br0")
	l.hub.Run(t, "ip", "link", "set", peer, "up")
	ip := fmt.Sprintf("%s.%d", subnet, 10+i)
	ns.Run(t, "ip", "addr", "add", ip+"/24", "dev", "eth0")
	ns.Run(t, "ip", "link", "set", "eth0", "up")
	return ns, ip
}

// partition drops, in r's namespace, every packet to and from the other
// replicas (not the proxies: they still reach r); heal removes the rules.
func partition(t *testing.T, r *replica, others []*replica, cut bool) {
	t.Helper()
	op := "-A"
	if !cut {
		op = "-D"
	}
	for _, o := range others {
		r.ns.Run(t, "iptables", op, "INPUT", "-s", o.ip, "-j", "DROP")
		r.ns.Run(t, "iptables", op, "OUTPUT", "-d", o.ip, "-j", "DROP")
	}
}
