package nstest

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// StatsName is the query name a forwarder answers with the number of
// other queries it has received so far (as the A record 0.0.HI.LO).
const StatsName = "stats.forwarder."

// maxForwarded bounds what one forwarder sends upstream, so that a DNS
// loop (a forwarder's queries captured back to it) ends instead of
// flooding the test machine.
const maxForwarded = 64

// runForwarder is the "dnsforward LISTEN UPSTREAM [SUFFIX ANSWER]" helper:
// a DNS forwarder (UDP and TCP; upstream over UDP), as systemd-resolved or dnsmasq on a host, or the
// DNS proxy of a sidecar. Names ending in SUFFIX are answered with ANSWER
// (the proxy's own table); others are sent to UPSTREAM from a fresh
// socket and the answer relayed. It prints "ready" once listening and
// runs until killed.
func runForwarder(args []string) error {
	if len(args) != 2 && len(args) != 4 {
		return fmt.Errorf("dnsforward: want LISTEN UPSTREAM [SUFFIX ANSWER], got %q", args)
	}
	pc, err := net.ListenPacket("udp", args[0])
	if err != nil {
		return err
	}
	var suffix string
	var answer netip.Addr
	if len(args) == 4 {
		suffix = args[2]
		if answer, err = netip.ParseAddr(args[3]); err != nil {
			return err
		}
	}
	ln, err := net.Listen("tcp", args[0])
	if err != nil {
		return err
	}
	go serveTCPForward(ln, args[1], suffix, answer)
	fmt.Println("ready")
	var received, forwarded atomic.Int64
	buf := make([]byte, 1500)
	for {
		k, from, err := pc.ReadFrom(buf)
		if err != nil {
			return err
		}
		q := append([]byte(nil), buf[:k]...)
		name := questionName(q)
		if name != StatsName {
			received.Add(1)
		}
		switch {
		case name == StatsName:
			n := received.Load()
			if resp, err := dnsAnswer(q, netip.AddrFrom4([4]byte{0, 0, byte(n >> 8), byte(n)})); err == nil {
				_, _ = pc.WriteTo(resp, from)
			}
		case suffix != "" && strings.HasSuffix(name, suffix):
			if resp, err := dnsAnswer(q, answer); err == nil {
				_, _ = pc.WriteTo(resp, from)
			}
		case forwarded.Add(1) <= maxForwarded:
			go func() {
				if resp, err := exchangeUDP(args[1], q, 0); err == nil {
					_, _ = pc.WriteTo(resp, from)
				}
			}()
		}
	}
}

// serveTCPForward answers DNS over TCP as runForwarder does over UDP
// (forwarding over UDP; no statistics, no limit).
func serveTCPForward(ln net.Listener, upstream, suffix string, answer netip.Addr) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(3 * time.Second))
			q, err := readTCPMsg(c)
			if err != nil {
				return
			}
			var resp []byte
			if suffix != "" && strings.HasSuffix(questionName(q), suffix) {
				resp, err = dnsAnswer(q, answer)
			} else {
				resp, err = exchangeUDP(upstream, q, 0)
			}
			if err == nil {
				_ = writeTCPMsg(c, resp)
			}
		}()
	}
}

func questionName(q []byte) string {
	var p dnsmessage.Parser
	if _, err := p.Start(q); err != nil {
		return ""
	}
	qq, err := p.Question()
	if err != nil {
		return ""
	}
	return qq.Name.String()
}

// exchangeUDP sends query to server from localPort (0: any) and returns
// the answer.
func exchangeUDP(server string, query []byte, localPort int) ([]byte, error) {
	d := net.Dialer{Timeout: 2 * time.Second}
	if localPort != 0 {
		d.LocalAddr = &net.UDPAddr{Port: localPort}
	}
	c, err := d.Dial("udp", server)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write(query); err != nil {
		return nil, err
	}
	buf := make([]byte, 1500)
	k, err := c.Read(buf)
	if err != nil {
		return nil, err
	}
	return buf[:k], nil
}

// ResolveFrom is Resolve over UDP from a fixed local port, so that tests
// can make two clients reuse one source port within the conntrack
// timeout.
func ResolveFrom(server, name string, localPort int) (netip.Addr, error) {
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 4343, RecursionDesired: true})
	_ = b.StartQuestions()
	_ = b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(name), Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET})
	query, _ := b.Finish()
	resp, err := exchangeUDP(server, query, localPort)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("dns udp %s from port %d: %w", server, localPort, err)
	}
	return firstA(resp)
}

func firstA(resp []byte) (netip.Addr, error) {
	var p dnsmessage.Parser
	if _, err := p.Start(resp); err != nil {
		return netip.Addr{}, err
	}
	_ = p.SkipAllQuestions()
	for {
		h, err := p.AnswerHeader()
		if err != nil {
			return netip.Addr{}, errors.New("dns: no A answer")
		}
		if h.Type == dnsmessage.TypeA {
			a, err := p.AResource()
			if err != nil {
				return netip.Addr{}, err
			}
			return netip.AddrFrom4(a.A), nil
		}
		_ = p.SkipAnswer()
	}
}

// ForwarderStats asks the forwarder at server how many queries it has
// received (stats queries not counted).
func ForwarderStats(ns *NS, server string) (int, error) {
	a, err := ns.Resolve("udp", server, StatsName)
	if err != nil {
		return 0, err
	}
	b := a.As4()
	return int(b[2])<<8 | int(b[3]), nil
}

// Start runs a long-lived helper command (see MaybeHelper) inside the
// namespace as uid and gid, waits until it prints "ready", and kills it
// at the end of the test. Unprivileged helpers may bind ports below 1024
// (the namespace's ip_unprivileged_port_start is set to 0).
func (n *NS) Start(t testing.TB, uid, gid int, args ...string) {
	t.Helper()
	bin, err := helperBinary()
	if err != nil {
		t.Fatalf("helper binary: %v", err)
	}
	n.Run(t, "sysctl", "-q", "-w", "net.ipv4.ip_unprivileged_port_start=0")
	cmdArgs := append([]string{"netns", "exec", n.Name, "setpriv",
		"--reuid=" + strconv.Itoa(uid), "--regid=" + strconv.Itoa(gid), "--clear-groups", bin}, args...)
	cmd := exec.Command("ip", cmdArgs...)
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("helper %v: %v", args, err)
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
	}
	t.Cleanup(stop)
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "ready" {
		stop()
		t.Fatalf("helper %v as uid %d did not start: %q, %v", args, uid, line, err)
	}
}
