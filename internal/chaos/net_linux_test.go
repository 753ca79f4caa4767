package chaos

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"testing"
	"time"

	"github.com/baremesh/baremesh/nodeagent/nstest"
)

// lan is the test's network: a hub namespace holding a bridge, and one
// namespace per replica with a veth into it. The test's own clients
// (proxies, HTTP checks) dial from the hub.
type lan struct {
	hub  *nstest.NS
	http *http.Client
}

const subnet = "10.213.7"

func newLAN(t *testing.T) *lan {
	t.Helper()
	hub := nstest.New(t)
	hub.Run(t, "ip", "link", "add", "br0", "type", "bridge")
	hub.Run(t, "ip", "addr", "add", subnet+".1/24", "dev", "br0")
	hub.Run(t, "ip", "link", "set", "br0", "up")
	l := &lan{hub: hub}
	// A big fleet's table is megabytes.
	l.http = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: l.dial, MaxIdleConnsPerHost: 4}}
	return l
}

// dial opens a TCP connection from the hub.
func (l *lan) dial(_ context.Context, network, addr string) (net.Conn, error) {
	return l.hub.Dial(network, addr)
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
