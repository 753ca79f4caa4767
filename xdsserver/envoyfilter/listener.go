package envoyfilter

import (
	"fmt"
	"slices"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/anypb"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/baremesh/baremesh/xdsserver/gen"
)

const hcmName = "envoy.filters.network.http_connection_manager"

// patchListener applies LISTENER, LISTENER_FILTER, FILTER_CHAIN,
// NETWORK_FILTER and HTTP_FILTER patches to l; false when l is removed.
func patchListener(r *run, l *listenerv3.Listener) bool {
	for _, p := range r.patches(networking.EnvoyFilter_LISTENER) {
		if !listenerMatch(l, p) {
			continue
		}
		switch {
		case p.op == networking.EnvoyFilter_Patch_REMOVE:
			r.mark(p)
			return false
		case isMerge(p.op):
			r.mark(p)
			if err := p.merge(l); err != nil {
				r.fail(p, err)
			}
		}
	}
	patchListenerFilters(r, l)
	patchFilterChains(r, l)
	return true
}

func isMerge(op networking.EnvoyFilter_Patch_Operation) bool {
	return op == networking.EnvoyFilter_Patch_MERGE || op == networking.EnvoyFilter_Patch_MERGE_AND_REPLACE_LIST
}

func patchListenerFilters(r *run, l *listenerv3.Listener) {
	for _, p := range r.patches(networking.EnvoyFilter_LISTENER_FILTER) {
		if !listenerMatch(l, p) {
			continue
		}
		name := p.match.GetListener().GetListenerFilter()
		matches := func(f *listenerv3.ListenerFilter) bool { return name == "" || f.GetName() == name }
		val := func() *listenerv3.ListenerFilter { return clone(p.value.(*listenerv3.ListenerFilter)) }
		fs, ok := l.ListenerFilters, true
		switch p.op {
		case networking.EnvoyFilter_Patch_ADD:
			fs = append(fs, val())
		case networking.EnvoyFilter_Patch_INSERT_FIRST:
			fs = insertAt(fs, 0, val())
		case networking.EnvoyFilter_Patch_INSERT_AFTER, networking.EnvoyFilter_Patch_INSERT_BEFORE:
			if name == "" {
				if p.op == networking.EnvoyFilter_Patch_INSERT_AFTER {
					fs = append(fs, val())
				} else {
					fs = insertAt(fs, 0, val())
				}
				break
			}
			i := indexOf(fs, matches)
			if ok = i >= 0; ok {
				if p.op == networking.EnvoyFilter_Patch_INSERT_AFTER {
					i++
				}
				fs = insertAt(fs, i, val())
			}
		case networking.EnvoyFilter_Patch_REPLACE:
			i := indexOf(fs, matches)
			if ok = name != "" && i >= 0; ok {
				fs[i] = val()
			}
		case networking.EnvoyFilter_Patch_REMOVE:
			n := len(fs)
			if name != "" {
				fs = slices.DeleteFunc(fs, matches)
			}
			ok = len(fs) != n
		case networking.EnvoyFilter_Patch_MERGE, networking.EnvoyFilter_Patch_MERGE_AND_REPLACE_LIST:
			ok = false
			if name == "" {
				break
			}
			for _, f := range fs {
				if !matches(f) || f.GetTypedConfig() == nil {
					continue
				}
				ok = true
				v := p.value.(*listenerv3.ListenerFilter)
				if v.GetTypedConfig() != nil {
					merged, err := mergeAny(f.GetTypedConfig(), v.GetTypedConfig())
					if err != nil {
						r.fail(p, fmt.Errorf("listener filter %s: %w", f.GetName(), err))
						continue
					}
					f.ConfigType = &listenerv3.ListenerFilter_TypedConfig{TypedConfig: merged}
				}
			}
		default:
			ok = false
		}
		l.ListenerFilters = fs
		if ok {
			r.mark(p)
		}
	}
}

func patchFilterChains(r *run, l *listenerv3.Listener) {
	for _, fc := range l.FilterChains {
		if fc.Filters != nil {
			patchFilterChain(r, l, fc)
		}
	}
	if fc := l.GetDefaultFilterChain(); fc.GetFilters() != nil {
		patchFilterChain(r, l, fc)
		if fc.Filters == nil {
			l.DefaultFilterChain = nil
		}
	}
	for _, p := range r.patches(networking.EnvoyFilter_FILTER_CHAIN) {
		if p.op == networking.EnvoyFilter_Patch_ADD && listenerMatch(l, p) {
			r.mark(p)
			l.FilterChains = append(l.FilterChains, clone(p.value.(*listenerv3.FilterChain)))
		}
	}
	// A removed chain is one whose filters were set to nil.
	l.FilterChains = slices.DeleteFunc(l.FilterChains, func(fc *listenerv3.FilterChain) bool { return fc.Filters == nil })
}

func patchFilterChain(r *run, l *listenerv3.Listener, fc *listenerv3.FilterChain) {
	for _, p := range r.patches(networking.EnvoyFilter_FILTER_CHAIN) {
		if !listenerMatch(l, p) || !filterChainMatch(l, fc, p) {
			continue
		}
		switch {
		case p.op == networking.EnvoyFilter_Patch_REMOVE:
			r.mark(p)
			fc.Filters = nil
			return
		case isMerge(p.op):
			r.mark(p)
			v := p.value.(*listenerv3.FilterChain)
			// A transport socket of the same name is merged inside its
			// Any (istiod's mergeTransportSocketListener); else the whole
			// value is merged.
			if ts := v.GetTransportSocket(); ts != nil && fc.GetTransportSocket() != nil && ts.GetName() == fc.GetTransportSocket().GetName() {
				if dst, src := fc.GetTransportSocket().GetTypedConfig(), ts.GetTypedConfig(); dst != nil && src != nil {
					merged, err := mergeAny(dst, src)
					if err != nil {
						r.fail(p, fmt.Errorf("transport socket: %w", err))
						continue
					}
					fc.TransportSocket.ConfigType = &corev3.TransportSocket_TypedConfig{TypedConfig: merged}
				}
				continue
			}
			if err := p.merge(fc); err != nil {
				r.fail(p, err)
			}
		}
	}
	patchNetworkFilters(r, l, fc)
}

func filterChainMatch(l *listenerv3.Listener, fc *listenerv3.FilterChain, p *patch) bool {
	lm := p.match.GetListener()
	if lm == nil {
		return true
	}
	virtual := l.GetName() == gen.VirtualInboundListener || l.GetName() == gen.VirtualOutboundListener
	if virtual && lm.GetPortNumber() > 0 && fc.GetFilterChainMatch().GetDestinationPort().GetValue() != lm.GetPortNumber() {
		return false
	}
	m := lm.GetFilterChain()
	if m == nil {
		return true
	}
	fcm := fc.GetFilterChainMatch()
	if m.GetName() != "" && m.GetName() != fc.GetName() {
		return false
	}
	if m.GetSni() != "" && !slices.Contains(fcm.GetServerNames(), m.GetSni()) {
		return false
	}
	if m.GetTransportProtocol() != "" && (fcm == nil || fcm.GetTransportProtocol() != m.GetTransportProtocol()) {
		return false
	}
	if m.GetApplicationProtocols() != "" {
		if fcm == nil {
			return false
		}
		for _, ap := range strings.Split(m.GetApplicationProtocols(), ",") {
			if !slices.Contains(fcm.GetApplicationProtocols(), ap) {
				return false
			}
		}
	}
	if m.GetDestinationPort() > 0 && fcm.GetDestinationPort().GetValue() != m.GetDestinationPort() {
		return false
	}
	return true
}

// listenerMatch is istiod's: the name, and the port of the listener's
// address except for virtual listeners (whose chains the port selects).
func listenerMatch(l *listenerv3.Listener, p *patch) bool {
	lm := p.match.GetListener()
	if lm == nil {
		return true
	}
	if lm.GetName() != "" && lm.GetName() != l.GetName() {
		return false
	}
	if p.applyTo != networking.EnvoyFilter_LISTENER && (l.GetName() == gen.VirtualInboundListener || l.GetName() == gen.VirtualOutboundListener) {
		return true
	}
	if lm.GetPortNumber() != 0 && l.GetAddress().GetSocketAddress().GetPortValue() != lm.GetPortNumber() {
		return false
	}
	return true
}

// filterName is the network filter a patch's match names, "" for any.
func filterName(p *patch) string {
	return p.match.GetListener().GetFilterChain().GetFilter().GetName()
}

// subFilterName is the HTTP filter a patch's match names, "" for any.
func subFilterName(p *patch) string {
	return p.match.GetListener().GetFilterChain().GetFilter().GetSubFilter().GetName()
}

func patchNetworkFilters(r *run, l *listenerv3.Listener, fc *listenerv3.FilterChain) {
	for _, p := range r.patches(networking.EnvoyFilter_NETWORK_FILTER) {
		if !listenerMatch(l, p) || !filterChainMatch(l, fc, p) {
			continue
		}
		name := filterName(p)
		matches := func(f *listenerv3.Filter) bool { return name == "" || f.GetName() == name }
		var val func() *listenerv3.Filter
		if p.value != nil {
			val = func() *listenerv3.Filter { return clone(p.value.(*listenerv3.Filter)) }
		}
		if fs, ok := listOp(p.op, name != "", fc.Filters, matches, val); ok {
			fc.Filters = fs
			r.mark(p)
		}
	}
	for _, f := range fc.Filters {
		patchNetworkFilter(r, l, fc, f)
	}
}

// listOp applies an ADD, INSERT_* , REPLACE or REMOVE to a list of
// filters as istiod does; false when nothing changed. named says the
// match names an element (matches then selects it).
func listOp[E any](op networking.EnvoyFilter_Patch_Operation, named bool, s []E, matches func(E) bool, val func() E) ([]E, bool) {
	switch op {
	case networking.EnvoyFilter_Patch_ADD:
		return append(s, val()), true
	case networking.EnvoyFilter_Patch_INSERT_FIRST:
		return insertAt(s, 0, val()), true
	case networking.EnvoyFilter_Patch_INSERT_AFTER, networking.EnvoyFilter_Patch_INSERT_BEFORE:
		if !named {
			if op == networking.EnvoyFilter_Patch_INSERT_AFTER {
				return append(s, val()), true
			}
			return insertAt(s, 0, val()), true
		}
		i := indexOf(s, matches)
		if i < 0 {
			return s, false
		}
		if op == networking.EnvoyFilter_Patch_INSERT_AFTER {
			i++
		}
		return insertAt(s, i, val()), true
	case networking.EnvoyFilter_Patch_REPLACE:
		i := indexOf(s, matches)
		if !named || i < 0 {
			return s, false
		}
		s[i] = val()
		return s, true
	case networking.EnvoyFilter_Patch_REMOVE:
		if !named {
			return s, false
		}
		n := len(s)
		s = slices.DeleteFunc(s, matches)
		return s, len(s) != n
	}
	return s, false
}

func patchNetworkFilter(r *run, l *listenerv3.Listener, fc *listenerv3.FilterChain, f *listenerv3.Filter) {
	for _, p := range r.patches(networking.EnvoyFilter_NETWORK_FILTER) {
		if !isMerge(p.op) || !listenerMatch(l, p) || !filterChainMatch(l, fc, p) || (filterName(p) != "" && filterName(p) != f.GetName()) {
			continue
		}
		if f.GetTypedConfig() == nil {
			continue
		}
		r.mark(p)
		v := p.value.(*listenerv3.Filter)
		if v.GetTypedConfig() != nil {
			merged, err := mergeAny(f.GetTypedConfig(), v.GetTypedConfig())
			if err != nil {
				r.fail(p, fmt.Errorf("network filter %s: %w", f.GetName(), err))
				continue
			}
			f.ConfigType = &listenerv3.Filter_TypedConfig{TypedConfig: merged}
		}
		if v.GetName() != "" {
			f.Name = v.GetName()
		}
	}
	if f.GetName() == hcmName {
		patchHTTPFilters(r, l, fc, f)
	}
}

func patchHTTPFilters(r *run, l *listenerv3.Listener, fc *listenerv3.FilterChain, f *listenerv3.Filter) {
	ps := r.patches(networking.EnvoyFilter_HTTP_FILTER)
	if len(ps) == 0 || f.GetTypedConfig() == nil {
		return
	}
	hcm := &hcmv3.HttpConnectionManager{}
	if err := f.GetTypedConfig().UnmarshalTo(hcm); err != nil {
		return
	}
	changed := false
	for _, p := range ps {
		if !listenerMatch(l, p) || !filterChainMatch(l, fc, p) || (filterName(p) != "" && filterName(p) != f.GetName()) {
			continue
		}
		name := subFilterName(p)
		matches := func(h *hcmv3.HttpFilter) bool { return name == "" || h.GetName() == name }
		var val func() *hcmv3.HttpFilter
		if p.value != nil {
			val = func() *hcmv3.HttpFilter { return clone(p.value.(*hcmv3.HttpFilter)) }
		}
		if hs, ok := listOp(p.op, name != "", hcm.HttpFilters, matches, val); ok {
			hcm.HttpFilters = hs
			changed = true
			r.mark(p)
		}
	}
	for _, h := range hcm.HttpFilters {
		for _, p := range ps {
			name := subFilterName(p)
			if !isMerge(p.op) || !listenerMatch(l, p) || !filterChainMatch(l, fc, p) ||
				(filterName(p) != "" && filterName(p) != f.GetName()) || (name != "" && name != h.GetName()) || h.GetTypedConfig() == nil {
				continue
			}
			r.mark(p)
			changed = true
			v := p.value.(*hcmv3.HttpFilter)
			if v.GetTypedConfig() != nil {
				merged, err := mergeAny(h.GetTypedConfig(), v.GetTypedConfig())
				if err != nil {
					r.fail(p, fmt.Errorf("http filter %s: %w", h.GetName(), err))
					continue
				}
				h.ConfigType = &hcmv3.HttpFilter_TypedConfig{TypedConfig: merged}
			}
			if v.GetName() != "" {
				h.Name = v.GetName()
			}
		}
	}
	if !changed {
		return
	}
	a, err := anypb.New(hcm)
	if err != nil {
		r.fail(ps[0], fmt.Errorf("packing %s: %w", hcmName, err))
		return
	}
	f.ConfigType = &listenerv3.Filter_TypedConfig{TypedConfig: a}
}
