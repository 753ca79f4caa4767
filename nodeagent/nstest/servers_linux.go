package nstest

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ServerOptions configure Serve.
type ServerOptions struct {
	// Transparent sets IP_TRANSPARENT so the listener accepts TPROXY'd
	// connections.
	Transparent bool
}

// Serve starts a TCP server in the namespace. Each connection first gets
// one banner line, "NAME orig=ORIGINAL_DST src=CLIENT", where
// ORIGINAL_DST is SO_ORIGINAL_DST when the connection was redirected (or
// the socket's local address otherwise, which is the original destination
// under TPROXY); then each line read is echoed back as "NAME echo LINE".
// The server stops at the end of the test.
func (n *NS) Serve(t testing.TB, network, addr, name string, opts ServerOptions) {
	t.Helper()
	var ln net.Listener
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		if !opts.Transparent {
			return nil
		}
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_IP, unix.IP_TRANSPARENT, 1)
			if serr == nil && network == "tcp6" {
				serr = unix.SetsockoptInt(int(fd), unix.SOL_IPV6, unix.IPV6_TRANSPARENT, 1)
			}
		})
		return errors.Join(err, serr)
	}}
	err := n.Do(func() error {
		var err error
		ln, err = lc.Listen(context.Background(), network, addr)
		return err
	})
	if err != nil {
		t.Fatalf("%s: listen %s %s in %s: %v", name, network, addr, n.Name, err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	conns := map[net.Conn]bool{}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns[c] = true
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				fmt.Fprintf(c, "%s orig=%s src=%s\n", name, originalDst(c), c.RemoteAddr())
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					fmt.Fprintf(c, "%s echo %s\n", name, sc.Text())
				}
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
}

// originalDst returns SO_ORIGINAL_DST (IPv4) or IP6T_SO_ORIGINAL_DST
// (IPv6), falling back to the local address.
func originalDst(c net.Conn) string {
	local := c.LocalAddr().(*net.TCPAddr)
	sc, ok := c.(syscall.Conn)
	if !ok {
		return local.String()
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return local.String()
	}
	var res string
	_ = raw.Control(func(fd uintptr) {
		var buf [28]byte // sockaddr_in6 is the larger
		size := uint32(len(buf))
		level := uintptr(unix.SOL_IP)
		if local.IP.To4() == nil {
			level = unix.SOL_IPV6
		}
		_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, fd, level, unix.SO_ORIGINAL_DST,
			uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&size)), 0)
		if errno != 0 {
			return
		}
		port := binary.BigEndian.Uint16(buf[2:4])
		if level == unix.SOL_IP {
			res = netip.AddrPortFrom(netip.AddrFrom4([4]byte(buf[4:8])), port).String()
		} else {
			res = netip.AddrPortFrom(netip.AddrFrom16([16]byte(buf[8:24])), port).String()
		}
	})
	if res == "" {
		return local.String()
	}
	return res
}

// Dial opens a TCP connection from inside the namespace.
func (n *NS) Dial(network, addr string) (net.Conn, error) {
	var c net.Conn
	err := n.Do(func() error {
		var err error
		c, err = net.DialTimeout(network, addr, 3*time.Second)
		return err
	})
	return c, err
}

// Banner dials addr from inside the namespace and returns the first line
// the server sends.
func (n *NS) Banner(network, addr string) (string, error) {
	c, err := n.Dial(network, addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	return ReadLine(c)
}

// ReadLine reads one line from c with a deadline.
func ReadLine(c net.Conn) (string, error) {
	_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return line, fmt.Errorf("reading from %s: %w", c.RemoteAddr(), err)
	}
	return strings.TrimSpace(line), nil
}
