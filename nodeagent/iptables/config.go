// Package iptables owns traffic capture on a host: a pure renderer from a
// typed Config to iptables-restore payloads with istio-iptables semantics
// (render.go), and an applier that installs them atomically, repairs drift
// and uninstalls them (applier.go, with Linux-only execution in _linux.go
// files).
//
// It imports nothing else of this module.
package iptables

import (
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Mode is how inbound traffic is captured.
type Mode string

// Inbound capture modes.
const (
	ModeRedirect Mode = "REDIRECT"
	ModeTProxy   Mode = "TPROXY"
)

// Defaults, the same numbers istio-iptables uses.
const (
	DefaultChainPrefix  = "BAREMESH"
	DefaultProxyID      = "1337"
	DefaultOutboundPort = 15001
	DefaultInboundPort  = 15006
	DefaultDNSPort      = 15053
	DefaultTProxyMark   = 0x539 // 1337
	DefaultTProxyTable  = 133
	DefaultTunnelPort   = 15008
	DefaultHostLoopback = "127.0.0.1/32"
	sshPort             = 22
	dnsPort             = 53
)

// ReservedInboundPorts are the default inboundManagementPorts, never
// captured inbound: the proxy's Prometheus (15090), health (15021) and
// status (15020) ports.
var ReservedInboundPorts = []int{15090, 15021, 15020}

// ErrInvalidConfig is wrapped by every validation error.
var ErrInvalidConfig = errors.New("invalid capture config")

// Config is the capture configuration. Field names in errors are the YAML
// names. The zero value of a field means "default" (see WithDefaults);
// Config values are treated as immutable once validated.
type Config struct {
	// Mode is REDIRECT (default) or TPROXY for inbound capture.
	Mode Mode `yaml:"mode" json:"mode"`
	// ChainPrefix names our chains (PREFIX_OUTPUT, ...). Default BAREMESH.
	ChainPrefix string `yaml:"chainPrefix" json:"chainPrefix"`
	// ProxyUID and ProxyGID are the proxy's users and groups: decimal ids,
	// comma-separated as istio-iptables' --proxy-uid/--proxy-gid ("1337" or
	// "1337,1338"); their traffic is never captured. The first of each is
	// the one the agent runs its proxy as. Default 1337.
	ProxyUID string `yaml:"proxyUID" json:"proxyUID"`
	ProxyGID string `yaml:"proxyGID" json:"proxyGID"`
	// OutboundPort, InboundPort and DNSPort are where the proxy listens.
	OutboundPort int `yaml:"outboundPort" json:"outboundPort"`
	InboundPort  int `yaml:"inboundPort" json:"inboundPort"`
	DNSPort      int `yaml:"dnsPort" json:"dnsPort"`
	// InboundPorts are the inbound TCP ports to capture: "*" for all (the
	// default when nil) or port numbers. An empty non-nil list captures none.
	InboundPorts []string `yaml:"inboundPorts" json:"inboundPorts"`
	// InboundPortsExclude are never captured inbound (with "*").
	InboundPortsExclude []int `yaml:"inboundPortsExclude" json:"inboundPortsExclude"`
	// CaptureSSH lets inbound port 22 be captured; by default it never is.
	CaptureSSH bool `yaml:"captureSSH" json:"captureSSH"`
	// InboundManagementPorts are never captured inbound (nil: 15090, 15021
	// and 15020, the proxy's own; an empty non-nil list: none).
	InboundManagementPorts []int `yaml:"inboundManagementPorts" json:"inboundManagementPorts"`
	// InboundTunnelPort is the proxy's HBONE tunnel port (istio-iptables'
	// --inbound-tunnel-port): never captured inbound, and the proxy's own
	// loopback connections to it are not sent back to it. Default 15008.
	InboundTunnelPort int `yaml:"inboundTunnelPort" json:"inboundTunnelPort"`
	// HostLoopbackCIDR is the IPv4 loopback range treated as "this host"
	// (istio-iptables' --host-ipv4-loopback-cidr). Default 127.0.0.1/32;
	// it must lie in 127.0.0.0/8.
	HostLoopbackCIDR string `yaml:"hostLoopbackCIDR" json:"hostLoopbackCIDR"`
	// OutboundPortsInclude are captured whatever their destination.
	OutboundPortsInclude []int `yaml:"outboundPortsInclude" json:"outboundPortsInclude"`
	// OutboundPortsExclude are never captured outbound.
	OutboundPortsExclude []int `yaml:"outboundPortsExclude" json:"outboundPortsExclude"`
	// OutboundIPRanges to capture: "*" (the default when nil) or CIDRs.
	OutboundIPRanges []string `yaml:"outboundIPRanges" json:"outboundIPRanges"`
	// OutboundIPRangesExclude are never captured outbound.
	OutboundIPRangesExclude []string `yaml:"outboundIPRangesExclude" json:"outboundIPRangesExclude"`
	// ExcludeInterfaces: traffic in or out of these is never captured.
	ExcludeInterfaces []string `yaml:"excludeInterfaces" json:"excludeInterfaces"`
	// RerouteVirtualInterfaces (Istio's KUBE_VIRT_INTERFACES): TCP arriving
	// on these (a VM's tap, a bridge) is sent to the outbound listener as if
	// sent from this host, for the ranges of outboundIPRanges.
	RerouteVirtualInterfaces []string `yaml:"rerouteVirtualInterfaces" json:"rerouteVirtualInterfaces"`
	// OwnerUsersInclude / OwnerUsersExclude and OwnerGroupsInclude /
	// OwnerGroupsExclude (names or ids) limit outbound capture, DNS
	// included, to processes of (or not of) these users and groups (Istio's
	// --capture-owner-groups / --exclude-owner-groups). Include and exclude
	// of one kind cannot both be set. Exclude a local DNS forwarder's user
	// here when it forwards to a server that dnsServers captures.
	OwnerUsersInclude  []string `yaml:"ownerUsersInclude" json:"ownerUsersInclude"`
	OwnerUsersExclude  []string `yaml:"ownerUsersExclude" json:"ownerUsersExclude"`
	OwnerGroupsInclude []string `yaml:"ownerGroupsInclude" json:"ownerGroupsInclude"`
	OwnerGroupsExclude []string `yaml:"ownerGroupsExclude" json:"ownerGroupsExclude"`
	// CaptureDNS redirects UDP and TCP port 53 to DNSPort, except the
	// proxy's own (upstream) queries, for the resolvers of DNSServers and
	// HostDNSServers only (so that a local forwarder's upstream queries
	// are not captured back: no loop), or to any server with
	// CaptureAllDNS. UDP DNS flows of apps and of the proxy are kept in
	// separate conntrack zones (2 and 1), as istio-iptables does.
	CaptureDNS bool `yaml:"captureDNS" json:"captureDNS"`
	// CaptureAllDNS captures DNS to any server (Istio's CAPTURE_ALL_DNS):
	// only safe without a local forwarder whose upstream is port 53.
	CaptureAllDNS bool `yaml:"captureAllDNS" json:"captureAllDNS"`
	// DNSServers are resolver addresses whose queries are captured, added
	// to HostDNSServers.
	DNSServers []string `yaml:"dnsServers" json:"dnsServers"`
	// HostDNSServers are the host's resolvers (the agent fills them from
	// /etc/resolv.conf, see ParseResolvConf); not read from YAML.
	HostDNSServers []string `yaml:"-" json:"-"`
	// DropInvalid drops packets conntrack marks INVALID.
	DropInvalid bool `yaml:"dropInvalid" json:"dropInvalid"`
	// DisableIPv6 renders no ip6tables rules.
	DisableIPv6 bool `yaml:"disableIPv6" json:"disableIPv6"`
	// TProxyMark and TProxyTable are the packet mark and routing table of
	// TPROXY mode. Defaults 0x539 and 133.
	TProxyMark  uint32 `yaml:"tproxyMark" json:"tproxyMark"`
	TProxyTable int    `yaml:"tproxyTable" json:"tproxyTable"`
}

// WithDefaults returns a copy with every unset field set to its default.
func (c Config) WithDefaults() Config {
	if c.Mode == "" {
		c.Mode = ModeRedirect
	}
	if c.ChainPrefix == "" {
		c.ChainPrefix = DefaultChainPrefix
	}
	if c.ProxyUID == "" {
		c.ProxyUID = DefaultProxyID
	}
	if c.ProxyGID == "" {
		c.ProxyGID = DefaultProxyID
	}
	if c.OutboundPort == 0 {
		c.OutboundPort = DefaultOutboundPort
	}
	if c.InboundPort == 0 {
		c.InboundPort = DefaultInboundPort
	}
	if c.DNSPort == 0 {
		c.DNSPort = DefaultDNSPort
	}
	if c.InboundPorts == nil {
		c.InboundPorts = []string{"*"}
	}
	if c.OutboundIPRanges == nil {
		c.OutboundIPRanges = []string{"*"}
	}
	if c.TProxyMark == 0 {
		c.TProxyMark = DefaultTProxyMark
	}
	if c.TProxyTable == 0 {
		c.TProxyTable = DefaultTProxyTable
	}
	if c.InboundTunnelPort == 0 {
		c.InboundTunnelPort = DefaultTunnelPort
	}
	if c.InboundManagementPorts == nil {
		c.InboundManagementPorts = ReservedInboundPorts
	}
	if c.HostLoopbackCIDR == "" {
		c.HostLoopbackCIDR = DefaultHostLoopback
	}
	return c
}

var (
	chainPrefixRE = regexp.MustCompile(`^[A-Z][A-Z0-9_]{0,15}$`)
	ifaceRE       = regexp.MustCompile(`^[A-Za-z0-9_.:@+-]{1,15}$`)
	ownerRE       = regexp.MustCompile(`^([0-9]{1,10}|[A-Za-z_][A-Za-z0-9_.-]{0,31})$`)
)

// Validate checks a config that has had WithDefaults applied. Each error
// names the field and wraps ErrInvalidConfig.
func (c Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: %s: %s", ErrInvalidConfig, field, fmt.Sprintf(format, args...)))
	}
	if c.Mode != ModeRedirect && c.Mode != ModeTProxy {
		bad("mode", "unknown mode %q (want REDIRECT or TPROXY)", c.Mode)
	}
	if !chainPrefixRE.MatchString(c.ChainPrefix) {
		bad("chainPrefix", "%q must be 1-16 upper-case letters, digits or _ starting with a letter", c.ChainPrefix)
	}
	for _, f := range []struct{ name, v string }{{"proxyUID", c.ProxyUID}, {"proxyGID", c.ProxyGID}} {
		if _, err := ParseIDs(f.v); err != nil {
			bad(f.name, "%v", err)
		}
	}
	ports := []struct {
		name string
		v    int
	}{{"outboundPort", c.OutboundPort}, {"inboundPort", c.InboundPort}, {"dnsPort", c.DNSPort},
		{"inboundTunnelPort", c.InboundTunnelPort}}
	for _, p := range ports {
		if !validPort(p.v) {
			bad(p.name, "port %d out of range (1-65535)", p.v)
		}
	}
	if c.InboundPort == c.OutboundPort {
		bad("inboundPort", "must differ from outboundPort (both %d)", c.InboundPort)
	}
	if c.CaptureDNS && (c.DNSPort == c.InboundPort || c.DNSPort == c.OutboundPort) {
		bad("dnsPort", "must differ from inboundPort and outboundPort (%d)", c.DNSPort)
	}
	inAll, inPorts, err := parseInboundPorts(c.InboundPorts)
	if err != nil {
		errs = append(errs, err)
	}
	checkPorts := func(field string, ps []int) {
		for i, p := range ps {
			if !validPort(p) {
				bad(fmt.Sprintf("%s[%d]", field, i), "port %d out of range (1-65535)", p)
			}
		}
	}
	checkPorts("inboundPortsExclude", c.InboundPortsExclude)
	checkPorts("inboundManagementPorts", c.InboundManagementPorts)
	checkPorts("outboundPortsInclude", c.OutboundPortsInclude)
	checkPorts("outboundPortsExclude", c.OutboundPortsExclude)
	if !inAll {
		for _, p := range inPorts {
			if slices.Contains(c.InboundPortsExclude, p) {
				bad("inboundPortsExclude", "port %d is also in inboundPorts", p)
			}
		}
	}
	for _, p := range c.OutboundPortsInclude {
		if slices.Contains(c.OutboundPortsExclude, p) {
			bad("outboundPortsExclude", "port %d is also in outboundPortsInclude", p)
		}
	}
	_, incl, err := parseRanges("outboundIPRanges", c.OutboundIPRanges, true)
	if err != nil {
		errs = append(errs, err)
	}
	_, excl, err := parseRanges("outboundIPRangesExclude", c.OutboundIPRangesExclude, false)
	if err != nil {
		errs = append(errs, err)
	}
	for _, p := range incl {
		if slices.Contains(excl, p) {
			bad("outboundIPRangesExclude", "%s is also in outboundIPRanges", p)
		}
	}
	for _, l := range []struct {
		field string
		names []string
	}{{"excludeInterfaces", c.ExcludeInterfaces}, {"rerouteVirtualInterfaces", c.RerouteVirtualInterfaces}} {
		for i, name := range l.names {
			if !ifaceRE.MatchString(name) {
				bad(fmt.Sprintf("%s[%d]", l.field, i), "%q is not an interface name", name)
			}
		}
	}
	for _, name := range c.RerouteVirtualInterfaces {
		if slices.Contains(c.ExcludeInterfaces, name) {
			bad("rerouteVirtualInterfaces", "%q is also in excludeInterfaces", name)
		}
	}
	for _, l := range []struct {
		field string
		names []string
	}{{"ownerUsersInclude", c.OwnerUsersInclude}, {"ownerUsersExclude", c.OwnerUsersExclude},
		{"ownerGroupsInclude", c.OwnerGroupsInclude}, {"ownerGroupsExclude", c.OwnerGroupsExclude}} {
		for i, name := range l.names {
			if !ownerRE.MatchString(name) {
				bad(fmt.Sprintf("%s[%d]", l.field, i), "%q is not a user or group name or id", name)
			}
		}
	}
	if len(c.OwnerUsersInclude) > 0 && len(c.OwnerUsersExclude) > 0 {
		bad("ownerUsersExclude", "cannot be set with ownerUsersInclude")
	}
	if len(c.OwnerGroupsInclude) > 0 && len(c.OwnerGroupsExclude) > 0 {
		bad("ownerGroupsExclude", "cannot be set with ownerGroupsInclude")
	}
	if lb, err := netip.ParsePrefix(c.HostLoopbackCIDR); err != nil || !lb.Addr().Is4() || !lb.Addr().IsLoopback() || lb.Bits() < 8 {
		bad("hostLoopbackCIDR", "%q is not an IPv4 range inside 127.0.0.0/8", c.HostLoopbackCIDR)
	}
	errs = append(errs, c.validateDNS()...)
	if c.TProxyTable <= 0 || c.TProxyTable >= 252 {
		bad("tproxyTable", "%d out of range (1-251; 252-255 are reserved)", c.TProxyTable)
	}
	return errors.Join(errs...)
}

func validPort(p int) bool { return p >= 1 && p <= 65535 }

// parseInboundPorts returns all=true for "*", else the numeric ports.
func parseInboundPorts(in []string) (all bool, ports []int, err error) {
	for i, s := range in {
		s = strings.TrimSpace(s)
		if s == "*" {
			if len(in) != 1 {
				return false, nil, fmt.Errorf("%w: inboundPorts: \"*\" must be the only entry", ErrInvalidConfig)
			}
			return true, nil, nil
		}
		p, perr := strconv.Atoi(s)
		if perr != nil {
			return false, nil, fmt.Errorf("%w: inboundPorts[%d]: %q is not a port number or \"*\"", ErrInvalidConfig, i, s)
		}
		if !validPort(p) {
			return false, nil, fmt.Errorf("%w: inboundPorts[%d]: port %d out of range (1-65535)", ErrInvalidConfig, i, p)
		}
		ports = append(ports, p)
	}
	return false, ports, nil
}

// parseRanges parses CIDRs; "*" (alone) means all when allowAll.
func parseRanges(field string, in []string, allowAll bool) (all bool, out []netip.Prefix, err error) {
	for i, s := range in {
		s = strings.TrimSpace(s)
		if s == "*" && allowAll {
			if len(in) != 1 {
				return false, nil, fmt.Errorf("%w: %s: \"*\" must be the only entry", ErrInvalidConfig, field)
			}
			return true, nil, nil
		}
		p, perr := netip.ParsePrefix(s)
		if perr != nil {
			return false, nil, fmt.Errorf("%w: %s[%d]: invalid CIDR %q: %w", ErrInvalidConfig, field, i, s, perr)
		}
		out = append(out, p.Masked())
	}
	return false, out, nil
}
