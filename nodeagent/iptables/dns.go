package iptables

import (
	"bufio"
	"bytes"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// ParseIDs parses a comma-separated list of decimal user or group ids
// ("1337" or "1337,1338"), as istio-iptables' --proxy-uid takes them.
func ParseIDs(s string) ([]string, error) {
	var out []string
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if n, err := strconv.ParseUint(f, 10, 32); err != nil || n == 1<<32-1 {
			return nil, fmt.Errorf("%q is not a number (want decimal user or group ids, comma-separated)", f)
		}
		out = append(out, f)
	}
	return out, nil
}

// FirstID returns the first id of a ProxyUID or ProxyGID list: the one
// the agent runs its proxy as.
func FirstID(s string) string {
	first, _, _ := strings.Cut(s, ",")
	return strings.TrimSpace(first)
}

// ParseResolvConf returns the nameserver addresses of a resolv.conf
// (zone suffixes dropped, unparsable entries skipped), in file order.
func ParseResolvConf(data []byte) []string {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || f[0] != "nameserver" {
			continue
		}
		host, _, _ := strings.Cut(f[1], "%")
		if a, err := netip.ParseAddr(host); err == nil {
			out = append(out, a.String())
		}
	}
	return out
}

// validateDNS checks the DNS capture settings.
func (c Config) validateDNS() []error {
	var errs []error
	for _, l := range []struct {
		field string
		addrs []string
	}{{"dnsServers", c.DNSServers}, {"hostDNSServers", c.HostDNSServers}} {
		for i, s := range l.addrs {
			if _, err := netip.ParseAddr(s); err != nil {
				errs = append(errs, fmt.Errorf("%w: %s[%d]: %q is not an IP address", ErrInvalidConfig, l.field, i, s))
			}
		}
	}
	if c.CaptureDNS && !c.CaptureAllDNS && len(c.DNSServers)+len(c.HostDNSServers) == 0 {
		errs = append(errs, fmt.Errorf("%w: captureDNS: no resolver to capture: list dnsServers (or nameservers in "+
			"/etc/resolv.conf), or set captureAllDNS (only safe without a local DNS forwarder)", ErrInvalidConfig))
	}
	return errs
}

// dnsServers returns the resolvers of one family whose queries are
// captured (host's first, de-duplicated).
func (c Config) dnsServers(f Family) []netip.Addr {
	var out []netip.Addr
	seen := map[netip.Addr]bool{}
	for _, s := range append(append([]string(nil), c.HostDNSServers...), c.DNSServers...) {
		a, err := netip.ParseAddr(s)
		if err != nil || seen[a.Unmap()] {
			continue
		}
		a = a.Unmap()
		seen[a] = true
		if a.Is4() == (f == V4) {
			out = append(out, a)
		}
	}
	return out
}
