package nstest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// ServeDNS starts a DNS resolver on addr (UDP and TCP) in the namespace
// that answers every A query with answer, so a test can tell which
// resolver answered.
func (n *NS) ServeDNS(t testing.TB, addr string, answer netip.Addr) {
	t.Helper()
	var pc net.PacketConn
	var ln net.Listener
	err := n.Do(func() error {
		var err error
		if pc, err = net.ListenPacket("udp", addr); err != nil {
			return err
		}
		ln, err = net.Listen("tcp", addr)
		return err
	})
	if err != nil {
		t.Fatalf("dns: listen %s in %s: %v", addr, n.Name, err)
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		buf := make([]byte, 1500)
		for {
			k, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if resp, err := dnsAnswer(buf[:k], answer); err == nil {
				_, _ = pc.WriteTo(resp, from)
			}
		}
	}()
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(3 * time.Second))
				q, err := readTCPMsg(c)
				if err != nil {
					return
				}
				if resp, err := dnsAnswer(q, answer); err == nil {
					_ = writeTCPMsg(c, resp)
				}
			}()
		}
	}()
	t.Cleanup(func() {
		pc.Close()
		ln.Close()
		wg.Wait()
	})
}

func dnsAnswer(query []byte, answer netip.Addr) ([]byte, error) {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil {
		return nil, err
	}
	q, err := p.Question()
	if err != nil {
		return nil, err
	}
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true})
	_ = b.StartQuestions()
	_ = b.Question(q)
	_ = b.StartAnswers()
	_ = b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 5},
		dnsmessage.AResource{A: answer.As4()})
	return b.Finish()
}

func readTCPMsg(r io.Reader) ([]byte, error) {
	var l [2]byte
	if _, err := io.ReadFull(r, l[:]); err != nil {
		return nil, err
	}
	msg := make([]byte, binary.BigEndian.Uint16(l[:]))
	_, err := io.ReadFull(r, msg)
	return msg, err
}

func writeTCPMsg(w io.Writer, msg []byte) error {
	_, err := w.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(msg))), msg...))
	return err
}

// Resolve sends an A query for name to server over network ("udp" or
// "tcp") from the current namespace and returns the first answer.
func Resolve(network, server, name string) (netip.Addr, error) {
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 4242, RecursionDesired: true})
	_ = b.StartQuestions()
	_ = b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(name), Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET})
	query, _ := b.Finish()
	c, err := net.DialTimeout(network, server, 3*time.Second)
	if err != nil {
		return netip.Addr{}, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	var resp []byte
	if network == "tcp" {
		if err := writeTCPMsg(c, query); err != nil {
			return netip.Addr{}, err
		}
		resp, err = readTCPMsg(c)
	} else {
		if _, err = c.Write(query); err == nil {
			buf := make([]byte, 1500)
			var k int
			k, err = c.Read(buf)
			resp = buf[:k]
		}
	}
	if err != nil {
		return netip.Addr{}, fmt.Errorf("dns %s %s: %w", network, server, err)
	}
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

// Resolve runs Resolve inside the namespace.
func (n *NS) Resolve(network, server, name string) (netip.Addr, error) {
	var a netip.Addr
	err := n.Do(func() error {
		var err error
		a, err = Resolve(network, server, name)
		return err
	})
	return a, err
}
