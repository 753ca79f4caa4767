package tunnel

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/baremesh/baremesh/nodeagent/iptables"
	"github.com/baremesh/baremesh/nodeagent/nsexec"
)

// Executor applies one Side in one network namespace. Its methods are
// safe for use by one goroutine at a time.
type Executor struct {
	log     *slog.Logger
	netns   string // empty: the current namespace
	applier *iptables.Applier
	enrol   *Enroller // creates a side's EnrolChain
}

// NewExecutor returns an executor for the named namespace ("" for the
// agent's own) using iptables backend b.
func NewExecutor(log *slog.Logger, netnsName string, b iptables.Backend) *Executor {
	return &Executor{log: log, netns: netnsName, enrol: &Enroller{Backend: b, NetNS: netnsName},
		applier: iptables.NewApplier(log, iptables.ApplierOptions{Runner: &iptables.ExecRunner{Backend: b, NetNS: netnsName}})}
}

func (e *Executor) handle() (*netlink.Handle, error) {
	if e.netns == "" {
		return netlink.NewHandle()
	}
	ns, err := netns.GetFromName(e.netns)
	if err != nil {
		return nil, fmt.Errorf("netns %s: %w", e.netns, err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return nil, fmt.Errorf("netlink in netns %s: %w", e.netns, err)
	}
	return h, nil
}

// Ensure makes the namespace hold s and returns what it had to change
// (empty when everything was in place). It is idempotent.
func (e *Executor) Ensure(ctx context.Context, s Side) ([]string, error) {
	h, err := e.handle()
	if err != nil {
		return nil, err
	}
	defer h.Close()
	var changed []string
	link, fixed, err := ensureLink(h, s.Link)
	if err != nil {
		return changed, err
	}
	changed = append(changed, fixed...)
	if fixed, err = ensureAddrRoutesRules(h, link, s); err != nil {
		return changed, err
	}
	changed = append(changed, fixed...)
	if fixed, err = e.ensureSysctls(s.Sysctls); err != nil {
		return changed, err
	}
	changed = append(changed, fixed...)
	if s.EnrolChain != "" {
		if err := e.enrol.EnsureChain(ctx, s.Iptables.V6 != nil); err != nil {
			return changed, err
		}
	}
	if e.applier.Applied() != s.Iptables {
		if err := e.applier.Apply(ctx, s.Iptables); err != nil {
			return changed, fmt.Errorf("iptables: %w", err)
		}
		changed = append(changed, "iptables applied")
	} else if d, err := e.applier.Repair(ctx); err != nil {
		return changed, fmt.Errorf("iptables: %w", err)
	} else if d.Any() {
		changed = append(changed, "iptables "+d.String())
	}
	return changed, nil
}

// Remove deletes the side's rules, routes, device and chains; what is
// already gone is not an error.
func (e *Executor) Remove(ctx context.Context, s Side) error {
	h, err := e.handle()
	if err != nil {
		return err
	}
	defer h.Close()
	var errs []error
	for _, r := range s.Rules {
		for {
			err := h.RuleDel(nlRule(r))
			if err != nil {
				if !errors.Is(err, unix.ENOENT) {
					errs = append(errs, fmt.Errorf("deleting rule %s: %w", r, err))
				}
				break
			}
		}
	}
	for _, r := range s.Routes {
		if r.Table == 0 {
			continue // main-table routes go with the device
		}
		if nr, err := nlRoute(h, r); err == nil {
			if err := h.RouteDel(nr); err != nil && !errors.Is(err, unix.ESRCH) {
				errs = append(errs, fmt.Errorf("deleting route %s: %w", r, err))
			}
		}
	}
	if l, err := h.LinkByName(s.Link.Name); err == nil {
		if err := h.LinkDel(l); err != nil {
			errs = append(errs, fmt.Errorf("deleting link %s: %w", s.Link.Name, err))
		}
	}
	if err := e.applier.Uninstall(ctx, s.Iptables.Prefix, nil); err != nil {
		errs = append(errs, fmt.Errorf("iptables: %w", err))
	}
	return errors.Join(errs...)
}

func nlLink(l Link) netlink.Link {
	attrs := netlink.NewLinkAttrs()
	attrs.Name, attrs.MTU = l.Name, l.MTU
	if l.Kind == KindVXLAN {
		return &netlink.Vxlan{LinkAttrs: attrs, VxlanId: int(l.VNI), SrcAddr: ip(l.Local), Group: ip(l.Remote), Port: l.Port}
	}
	return &netlink.Geneve{LinkAttrs: attrs, ID: l.VNI, Remote: ip(l.Remote), Dport: uint16(l.Port)}
}

func ip(a netip.Addr) net.IP { return net.IP(a.AsSlice()) }

// linkMatches compares the attributes we set with what the kernel has.
func linkMatches(have netlink.Link, want Link) bool {
	switch v := have.(type) {
	case *netlink.Vxlan:
		return want.Kind == KindVXLAN && v.VxlanId == int(want.VNI) && v.Port == want.Port &&
			v.SrcAddr.Equal(ip(want.Local)) && v.Group.Equal(ip(want.Remote)) && (want.MTU == 0 || v.MTU == want.MTU)
	case *netlink.Geneve:
		return want.Kind == KindGeneve && v.ID == want.VNI && v.Dport == uint16(want.Port) &&
			v.Remote.Equal(ip(want.Remote)) && (want.MTU == 0 || v.MTU == want.MTU)
	}
	return false
}

func ensureLink(h *netlink.Handle, want Link) (netlink.Link, []string, error) {
	var changed []string
	have, err := h.LinkByName(want.Name)
	if err == nil && !linkMatches(have, want) {
		if err := h.LinkDel(have); err != nil {
			return nil, nil, fmt.Errorf("replacing link %s: %w", want.Name, err)
		}
		changed = append(changed, "link "+want.Name+" replaced")
		have = nil
	} else if err != nil {
		have = nil
	}
	if have == nil {
		if err := h.LinkAdd(nlLink(want)); err != nil {
			return nil, changed, fmt.Errorf("adding %s link %s: %w", want.Kind, want.Name, err)
		}
		if have, err = h.LinkByName(want.Name); err != nil {
			return nil, changed, fmt.Errorf("link %s after adding: %w", want.Name, err)
		}
		changed = append(changed, "link "+want.Name+" added")
	}
	if have.Attrs().Flags&net.FlagUp == 0 {
		if err := h.LinkSetUp(have); err != nil {
			return nil, changed, fmt.Errorf("setting %s up: %w", want.Name, err)
		}
		changed = append(changed, "link "+want.Name+" up")
	}
	return have, changed, nil
}

func ensureAddrRoutesRules(h *netlink.Handle, link netlink.Link, s Side) ([]string, error) {
	var changed []string
	addrs, err := h.AddrList(link, unix.AF_UNSPEC)
	if err != nil {
		return nil, fmt.Errorf("addresses of %s: %w", s.Link.Name, err)
	}
	for _, want := range []netip.Prefix{s.Addr, s.Addr6} {
		if !want.IsValid() {
			continue
		}
		found := false
		for _, a := range addrs {
			if a.IPNet.String() == want.String() {
				found = true
			}
		}
		if found {
			continue
		}
		na := &netlink.Addr{IPNet: ipNet(want)}
		if want.Addr().Is6() {
			na.Flags = unix.IFA_F_NODAD // usable at once; the far end is ours
		}
		if err := h.AddrReplace(link, na); err != nil {
			return changed, fmt.Errorf("address %s on %s: %w", want, s.Link.Name, err)
		}
		changed = append(changed, "address "+want.String())
	}
	for _, r := range s.Routes {
		nr, err := nlRoute(h, r)
		if err != nil {
			return changed, err
		}
		have, err := h.RouteListFiltered(nr.Family, nr, netlink.RT_FILTER_DST|netlink.RT_FILTER_TABLE|netlink.RT_FILTER_OIF|netlink.RT_FILTER_GW)
		if err != nil {
			return changed, fmt.Errorf("listing routes: %w", err)
		}
		if len(have) == 0 {
			if err := h.RouteReplace(nr); err != nil {
				return changed, fmt.Errorf("route %s: %w", r, err)
			}
			changed = append(changed, "route "+r.String())
		}
	}
	rules4, err := h.RuleList(unix.AF_INET)
	if err != nil {
		return changed, fmt.Errorf("listing rules: %w", err)
	}
	rules6, err := h.RuleList(unix.AF_INET6)
	if err != nil && s.Addr6.IsValid() {
		return changed, fmt.Errorf("listing IPv6 rules: %w", err)
	}
	for _, r := range s.Rules {
		rules := rules4
		if r.family() == unix.AF_INET6 {
			rules = rules6
		}
		if !hasRule(rules, r) {
			if err := h.RuleAdd(nlRule(r)); err != nil {
				return changed, fmt.Errorf("rule %s: %w", r, err)
			}
			changed = append(changed, "rule "+r.String())
		}
	}
	return changed, nil
}

func hasRule(rules []netlink.Rule, r Rule) bool {
	for _, have := range rules {
		if have.Table != r.Table || have.Priority != r.Priority {
			continue
		}
		if r.Dst.IsValid() {
			if have.Dst != nil && have.Dst.String() == r.Dst.String() {
				return true
			}
			continue
		}
		if have.Mark == r.Mark && have.Mask != nil && *have.Mask == r.Mask && have.IifName == r.Iif {
			return true
		}
	}
	return false
}

// ipNet converts a prefix of either family.
func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: ip(p.Addr()), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

func (r Rule) family() int {
	if r.V6 || (r.Dst.IsValid() && r.Dst.Addr().Is6()) {
		return unix.AF_INET6
	}
	return unix.AF_INET
}

func nlRule(r Rule) *netlink.Rule {
	nr := netlink.NewRule()
	nr.Family, nr.Table, nr.Priority = r.family(), r.Table, r.Priority
	if r.Dst.IsValid() {
		nr.Dst = ipNet(r.Dst)
	} else {
		mask := r.Mask
		nr.Mark, nr.Mask, nr.IifName = r.Mark, &mask, r.Iif
	}
	return nr
}

func nlRoute(h *netlink.Handle, r Route) (*netlink.Route, error) {
	dev, err := h.LinkByName(r.Dev)
	if err != nil {
		return nil, fmt.Errorf("route %s: device: %w", r, err)
	}
	family := unix.AF_INET
	if r.Dst.Addr().Is6() {
		family = unix.AF_INET6
	}
	nr := &netlink.Route{LinkIndex: dev.Attrs().Index, Table: r.Table, Family: family, Dst: ipNet(r.Dst)}
	if r.Via.IsValid() {
		nr.Gw = ip(r.Via)
	}
	if r.Local {
		nr.Type, nr.Scope = unix.RTN_LOCAL, netlink.SCOPE_HOST
	}
	if nr.Table == 0 {
		nr.Table = unix.RT_TABLE_MAIN
	}
	return nr, nil
}

// ensureSysctls writes /proc/sys/net settings from a thread inside the
// namespace (/proc/sys/net shows the opener's namespace).
func (e *Executor) ensureSysctls(sc []Sysctl) ([]string, error) {
	var changed []string
	err := e.inNS(func() error {
		for _, s := range sc {
			path := "/proc/sys/" + strings.ReplaceAll(s.Key, ".", "/")
			if b, err := os.ReadFile(path); err == nil && strings.TrimSpace(string(b)) == s.Value {
				continue
			}
			if err := os.WriteFile(path, []byte(s.Value), 0o644); err != nil {
				return fmt.Errorf("sysctl %s: %w", s.Key, err)
			}
			changed = append(changed, "sysctl "+s.Key+"="+s.Value)
		}
		return nil
	})
	return changed, err
}

// inNS runs fn inside the executor's namespace.
func (e *Executor) inNS(fn func() error) error {
	if e.netns == "" {
		return fn()
	}
	return nsexec.Do(nsexec.Path(e.netns), fn)
}
