package iptables

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// NetlinkRouter installs TPROXY policy routing with netlink, in the
// current network namespace or in a named one.
type NetlinkRouter struct {
	NetNS string // empty: the current namespace
}

var _ Router = (*NetlinkRouter)(nil)

func (r *NetlinkRouter) handle() (*netlink.Handle, error) {
	if r.NetNS == "" {
		return netlink.NewHandle()
	}
	ns, err := netns.GetFromName(r.NetNS)
	if err != nil {
		return nil, fmt.Errorf("netns %s: %w", r.NetNS, err)
	}
	defer ns.Close()
	return netlink.NewHandleAt(ns)
}

func nlFamily(f Family) int {
	if f == V6 {
		return netlink.FAMILY_V6
	}
	return netlink.FAMILY_V4
}

func defaultDst(f Family) *net.IPNet {
	if f == V6 {
		return &net.IPNet{IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)}
	}
	return &net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)}
}

func (r *NetlinkRouter) state(h *netlink.Handle, f Family, rt Route) (rules []netlink.Rule, routes []netlink.Route, err error) {
	all, err := h.RuleList(nlFamily(f))
	if err != nil {
		return nil, nil, fmt.Errorf("listing rules: %w", err)
	}
	for _, ru := range all {
		if ru.Mark == rt.Mark && ru.Table == rt.Table {
			rules = append(rules, ru)
		}
	}
	routes, err = h.RouteListFiltered(nlFamily(f), &netlink.Route{Table: rt.Table}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return nil, nil, fmt.Errorf("listing routes of table %d: %w", rt.Table, err)
	}
	return rules, routes, nil
}

// EnsureRoute implements Router.
func (r *NetlinkRouter) EnsureRoute(_ context.Context, f Family, rt Route) error {
	h, err := r.handle()
	if err != nil {
		return err
	}
	defer h.Close()
	rules, routes, err := r.state(h, f, rt)
	if err != nil {
		return err
	}
	if len(rules) == 0 {
		ru := netlink.NewRule()
		ru.Family, ru.Mark, ru.Table = nlFamily(f), rt.Mark, rt.Table
		if err := h.RuleAdd(ru); err != nil {
			return fmt.Errorf("adding rule fwmark %#x lookup %d: %w", rt.Mark, rt.Table, err)
		}
	}
	if len(routes) == 0 {
		lo, err := h.LinkByName("lo")
		if err != nil {
			return fmt.Errorf("finding lo: %w", err)
		}
		route := &netlink.Route{LinkIndex: lo.Attrs().Index, Dst: defaultDst(f), Table: rt.Table,
			Type: unix.RTN_LOCAL, Scope: netlink.SCOPE_HOST, Family: nlFamily(f)}
		if err := h.RouteAdd(route); err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("adding local default route to table %d: %w", rt.Table, err)
		}
	}
	return nil
}

// HasRoute implements Router.
func (r *NetlinkRouter) HasRoute(_ context.Context, f Family, rt Route) (bool, error) {
	h, err := r.handle()
	if err != nil {
		return false, err
	}
	defer h.Close()
	rules, routes, err := r.state(h, f, rt)
	return len(rules) > 0 && len(routes) > 0, err
}

// RemoveRoute implements Router.
func (r *NetlinkRouter) RemoveRoute(_ context.Context, f Family, rt Route) error {
	h, err := r.handle()
	if err != nil {
		return err
	}
	defer h.Close()
	rules, routes, err := r.state(h, f, rt)
	if err != nil {
		return err
	}
	var errs []error
	for i := range rules {
		if err := h.RuleDel(&rules[i]); err != nil {
			errs = append(errs, fmt.Errorf("deleting rule fwmark %#x: %w", rt.Mark, err))
		}
	}
	for i := range routes {
		if err := h.RouteDel(&routes[i]); err != nil {
			errs = append(errs, fmt.Errorf("deleting route in table %d: %w", rt.Table, err))
		}
	}
	return errors.Join(errs...)
}
