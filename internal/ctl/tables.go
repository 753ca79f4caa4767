package ctl

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// The proxy-config tables, with istioctl proxy-config's columns where
// baremesh has the data (it has no DESTINATION RULE column: baremesh puts
// no Istio metadata on clusters).

func newTable(w io.Writer, header ...string) *tabwriter.Writer {
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	return tw
}

func clusterTable(w io.Writer, res []map[string]any, _ configFilter) {
	tw := newTable(w, "SERVICE FQDN", "PORT", "SUBSET", "DIRECTION", "TYPE")
	for _, r := range res {
		dir, port, subset, fqdn, ok := clusterParts(str(r, "name"))
		if !ok {
			dir, port, subset = "-", "-", "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", fqdn, port, dash(subset), dir, clusterType(r))
	}
	_ = tw.Flush()
}

// clusterType is the discovery type; protojson leaves out STATIC (0).
func clusterType(r map[string]any) string {
	if t := str(r, "type"); t != "" {
		return t
	}
	if t := str(r, "clusterType", "name"); t != "" {
		return t
	}
	return "STATIC"
}

func listenerTable(w io.Writer, res []map[string]any, _ configFilter) {
	tw := newTable(w, "NAME", "ADDRESS", "PORT", "MATCH", "DESTINATION")
	for _, r := range res {
		name := str(r, "name")
		addr, port := str(r, "address", "socketAddress", "address"), str(r, "address", "socketAddress", "portValue")
		if r["apiListener"] != nil { // proxyless gRPC: a listener per "host:port", no socket
			addr, port = "(api listener)", "-"
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", name, addr, port, "ALL", hcmDest(str(r, "apiListener", "apiListener", "rds", "routeConfigName"), r["apiListener"]))
			continue
		}
		chains := list(r, "filterChains")
		if dc, ok := r["defaultFilterChain"]; ok {
			chains = append(chains, dc)
		}
		if len(chains) == 0 {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", name, addr, port, "-", "-")
		}
		for _, c := range chains {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", name, addr, port, chainMatch(c), chainDest(c))
		}
	}
	_ = tw.Flush()
}

// chainMatch renders a filter chain's match as istioctl does: ALL, or
// its fields joined with "; ".
func chainMatch(c any) string {
	var parts []string
	if p := str(c, "filterChainMatch", "destinationPort"); p != "" {
		parts = append(parts, "port "+p)
	}
	if t := str(c, "filterChainMatch", "transportProtocol"); t != "" {
		parts = append(parts, "Trans: "+t)
	}
	if l := joinList(list(c, "filterChainMatch", "applicationProtocols")); l != "" {
		parts = append(parts, "App: "+l)
	}
	if l := joinList(list(c, "filterChainMatch", "serverNames")); l != "" {
		parts = append(parts, "SNI: "+l)
	}
	var cidrs []string
	for _, p := range list(c, "filterChainMatch", "prefixRanges") {
		cidrs = append(cidrs, str(p, "addressPrefix")+"/"+str(p, "prefixLen"))
	}
	if len(cidrs) > 0 {
		parts = append(parts, "Addr: "+strings.Join(cidrs, ","))
	}
	if len(parts) == 0 {
		return "ALL"
	}
	return strings.Join(parts, "; ")
}

// chainDest is where a chain sends traffic: "Route: NAME" for HTTP,
// "Cluster: NAME" for TCP.
func chainDest(c any) string {
	for _, f := range list(c, "filters") {
		tc := mapOf(f, "typedConfig")
		at := str(tc, "@type")
		switch {
		case strings.HasSuffix(at, ".HttpConnectionManager"):
			return hcmDest(str(tc, "rds", "routeConfigName"), tc)
		case strings.HasSuffix(at, ".TcpProxy"):
			if cl := str(tc, "cluster"); cl != "" {
				return "Cluster: " + cl
			}
			return "Cluster: (weighted)"
		}
	}
	if n := str(c, "name"); n != "" {
		return n
	}
	return "-"
}

func hcmDest(rds string, hcm any) string {
	if rds != "" {
		return "Route: " + rds
	}
	if n := str(hcm, "routeConfig", "name"); n != "" {
		return "Inline Route: " + n
	}
	return "Inline Route"
}

func routeTable(w io.Writer, res []map[string]any, f configFilter) {
	tw := newTable(w, "NAME", "VHOST NAME", "DOMAINS", "MATCH", "DESTINATION")
	for _, r := range res {
		for _, vh := range list(r, "virtualHosts") {
			domains := list(vh, "domains")
			d := joinList(domains)
			if len(domains) > 1 {
				d = fmt.Sprint(domains[0]) + fmt.Sprintf(" +%d more", len(domains)-1)
			}
			if f.fqdn != "" && !keepRoute(map[string]any{"virtualHosts": []any{vh}}, f) {
				continue
			}
			routes := list(vh, "routes")
			if len(routes) == 0 {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", str(r, "name"), str(vh, "name"), d, "-", "-")
			}
			for _, rt := range routes {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", str(r, "name"), str(vh, "name"), d, routeMatch(rt), routeDest(rt))
			}
		}
	}
	_ = tw.Flush()
}

func routeMatch(rt any) string {
	m := mapOf(rt, "match")
	var s string
	switch {
	case str(m, "prefix") != "":
		s = str(m, "prefix") + "*"
	case str(m, "path") != "":
		s = str(m, "path")
	case str(m, "safeRegex", "regex") != "":
		s = "~" + str(m, "safeRegex", "regex")
	case str(m, "pathSeparatedPrefix") != "":
		s = str(m, "pathSeparatedPrefix") + "/*"
	default:
		s = "/*"
	}
	if h := list(m, "headers"); len(h) > 0 {
		var names []string
		for _, x := range h {
			names = append(names, str(x, "name"))
		}
		s += " (headers: " + strings.Join(names, ",") + ")"
	}
	return s
}

func routeDest(rt any) string {
	r := mapOf(rt, "route")
	if c := str(r, "cluster"); c != "" {
		return c
	}
	if wc := list(r, "weightedClusters", "clusters"); len(wc) > 0 {
		var parts []string
		for _, c := range wc {
			parts = append(parts, fmt.Sprintf("%s %s%%", str(c, "name"), str(c, "weight")))
		}
		return strings.Join(parts, ", ")
	}
	if rd := mapOf(rt, "redirect"); rd != nil {
		return "redirect"
	}
	if dr := mapOf(rt, "directResponse"); dr != nil {
		return "direct response " + str(dr, "status")
	}
	return "-"
}

func endpointTable(w io.Writer, res []map[string]any, _ configFilter) {
	tw := newTable(w, "ENDPOINT", "STATUS", "WEIGHT", "LOCALITY", "CLUSTER")
	for _, r := range res {
		for _, le := range list(r, "endpoints") {
			loc := strings.Trim(strings.Join([]string{str(le, "locality", "region"), str(le, "locality", "zone"), str(le, "locality", "subZone")}, "/"), "/")
			for _, lb := range list(le, "lbEndpoints") {
				sa := mapOf(lb, "endpoint", "address", "socketAddress")
				ep := str(sa, "address") + ":" + str(sa, "portValue")
				if p := str(lb, "endpoint", "address", "pipe", "path"); p != "" {
					ep = "unix://" + p
				}
				st := str(lb, "healthStatus")
				if st == "" {
					st = "UNKNOWN" // protojson leaves out 0; Envoy treats it as healthy
				}
				wt := str(lb, "loadBalancingWeight")
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", ep, st, dash(wt), dash(loc), str(r, "clusterName"))
			}
		}
	}
	_ = tw.Flush()
}

func mapOf(m any, path ...string) map[string]any {
	for _, p := range path {
		mm, ok := m.(map[string]any)
		if !ok {
			return nil
		}
		m = mm[p]
	}
	mm, _ := m.(map[string]any)
	return mm
}

func joinList(l []any) string {
	var s []string
	for _, x := range l {
		s = append(s, fmt.Sprint(x))
	}
	return strings.Join(s, ",")
}
