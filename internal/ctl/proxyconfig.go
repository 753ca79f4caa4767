package ctl

import (
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// configFilter is proxy-config's --fqdn, --port, --subset, --direction.
type configFilter struct {
	fqdn, subset, direction string
	port                    int
}

// section is one proxy-config table: the xDS type it shows and how.
type section struct {
	name  string // the word on the command line
	typ   string // key in /debug/config_dump
	title string // heading under "all"
	table func(w io.Writer, res []map[string]any, f configFilter)
	keep  func(r map[string]any, f configFilter) bool
}

var sections = []section{
	{name: "clusters", typ: "cds", title: "CLUSTERS", table: clusterTable, keep: keepCluster},
	{name: "listeners", typ: "lds", title: "LISTENERS", table: listenerTable, keep: keepListener},
	{name: "routes", typ: "rds", title: "ROUTES", table: routeTable, keep: keepRoute},
	{name: "endpoints", typ: "eds", title: "ENDPOINTS", table: endpointTable, keep: keepEndpoint},
	{name: "secrets", typ: "sds", title: "SECRETS", table: secretTable, keep: keepSecret},
}

func proxyConfig(e *Env, args []string) int {
	fs := e.newFlags("proxy-config")
	var f configFilter
	var out string
	fs.StringVar(&out, "o", "table", "output: table, json or yaml (json and yaml print the resources as sent)")
	fs.StringVar(&out, "output", "table", "same as -o")
	fs.StringVar(&f.fqdn, "fqdn", "", "only clusters, endpoints and routes of this host")
	fs.IntVar(&f.port, "port", 0, "only clusters, endpoints and listeners of this port")
	fs.StringVar(&f.subset, "subset", "", "only clusters and endpoints of this subset")
	fs.StringVar(&f.direction, "direction", "", "only clusters and endpoints of this direction (inbound or outbound)")
	pos, err := parse(fs, args)
	if err != nil {
		return exitParse(err)
	}
	if len(pos) != 2 {
		fs.Usage()
		return 2
	}
	var secs []section
	for _, s := range sections {
		if pos[0] == s.name || pos[0] == "all" || pos[0] == strings.TrimSuffix(s.name, "s") {
			secs = append(secs, s)
		}
	}
	if len(secs) == 0 {
		fmt.Fprintf(e.Stderr, "baremeshctl proxy-config: unknown %q; choose clusters, listeners, routes, endpoints, secrets or all\n", pos[0])
		return 2
	}
	if out != "table" && out != "json" && out != "yaml" {
		fmt.Fprintf(e.Stderr, "baremeshctl proxy-config: -o %s: choose table, json or yaml\n", out)
		return 2
	}
	id, err := e.resolveProxy(pos[1])
	if err != nil {
		return e.fail(err)
	}
	var dumps []configDump
	if _, err := e.get("/debug/config_dump", url.Values{"proxy": {id}}, &dumps); err != nil {
		return e.fail(err)
	}
	byType := map[string][]map[string]any{}
	for _, d := range dumps[:1] { // one connection: a proxy with two shows its first
		for t, list := range d.Types {
			for _, raw := range list {
				var m map[string]any
				if err := json.Unmarshal(raw, &m); err == nil {
					byType[t] = append(byType[t], m)
				}
			}
		}
	}
	if len(dumps) > 1 {
		fmt.Fprintf(e.Stderr, "baremeshctl: %s has %d connections; showing %s\n", id, len(dumps), dumps[0].Connection)
	}
	raw := map[string][]map[string]any{}
	for i, s := range secs {
		var res []map[string]any
		for _, r := range byType[s.typ] {
			if s.keep(r, f) {
				res = append(res, r)
			}
		}
		sort.SliceStable(res, func(i, j int) bool { return sortKey(res[i]) < sortKey(res[j]) })
		if out != "table" {
			raw[s.name] = res
			continue
		}
		if len(secs) > 1 {
			if i > 0 {
				fmt.Fprintln(e.Stdout)
			}
			fmt.Fprintln(e.Stdout, s.title)
		}
		s.table(e.Stdout, res, f)
	}
	if out == "table" {
		return 0
	}
	var v any = raw
	if len(secs) == 1 {
		v = raw[secs[0].name]
		if v.([]map[string]any) == nil {
			v = []map[string]any{}
		}
	}
	b, _ := json.MarshalIndent(v, "", "  ")
	if out == "yaml" {
		if b, err = yaml.JSONToYAML(b); err != nil {
			return e.fail(err)
		}
		_, _ = e.Stdout.Write(b)
		return 0
	}
	fmt.Fprintln(e.Stdout, string(b))
	return 0
}

// resolveProxy turns a short name (as proxy-status prints it) into the
// proxy ID config_dump takes; full IDs and connection IDs pass.
func (e *Env) resolveProxy(name string) (string, error) {
	var ps []proxyStatusJSON
	if _, err := e.get("/debug/syncz", nil, &ps); err != nil {
		return "", err
	}
	sel := matchProxy(ps, name)
	if len(sel) == 0 {
		return "", fmt.Errorf("no connected proxy %q (the proxies: %s)", name, strings.Join(proxyNames(ps), ", "))
	}
	ids := map[string]bool{}
	for _, p := range sel {
		ids[p.ID] = true
	}
	if len(ids) > 1 {
		return "", fmt.Errorf("%q names %d proxies; give the full ID from proxy-status %s", name, len(ids), name)
	}
	if sel[0].Conn == name {
		return name, nil
	}
	return sel[0].ID, nil
}

// clusterParts splits Istio's cluster name "outbound|9080|v1|host".
func clusterParts(name string) (dir, port, subset, fqdn string, ok bool) {
	p := strings.Split(name, "|")
	if len(p) != 4 {
		return "", "", "", name, false
	}
	return p[0], p[1], p[2], p[3], true
}

func keepClusterName(name string, f configFilter) bool {
	dir, port, subset, fqdn, ok := clusterParts(name)
	if !ok {
		return f.port == 0 && f.subset == "" && f.direction == "" && (f.fqdn == "" || f.fqdn == name)
	}
	return (f.fqdn == "" || f.fqdn == fqdn) && (f.port == 0 || fmt.Sprint(f.port) == port) &&
		(f.subset == "" || f.subset == subset) && (f.direction == "" || f.direction == dir)
}

func keepCluster(r map[string]any, f configFilter) bool { return keepClusterName(str(r, "name"), f) }
func keepEndpoint(r map[string]any, f configFilter) bool {
	return keepClusterName(str(r, "clusterName"), f)
}

func keepListener(r map[string]any, f configFilter) bool {
	if f.port == 0 {
		return true
	}
	if p := str(r, "address", "socketAddress", "portValue"); p != "" {
		return p == fmt.Sprint(f.port)
	}
	return strings.HasSuffix(str(r, "name"), fmt.Sprintf(":%d", f.port)) // an API listener "host:port"
}

func keepRoute(r map[string]any, f configFilter) bool {
	if f.fqdn == "" {
		return true
	}
	for _, vh := range list(r, "virtualHosts") {
		for _, d := range list(vh, "domains") {
			if s, _ := d.(string); s == f.fqdn || strings.HasPrefix(s, f.fqdn+":") {
				return true
			}
		}
	}
	return false
}

// sortKey orders Istio cluster names (and endpoints by cluster) by host,
// port, subset and direction, as istioctl lists them; others by name.
func sortKey(r map[string]any) string {
	n := str(r, "name")
	if n == "" {
		n = str(r, "clusterName")
	}
	if dir, port, subset, fqdn, ok := clusterParts(n); ok {
		return fmt.Sprintf("%s\x00%05s\x00%s\x00%s", fqdn, port, subset, dir)
	}
	return n
}

// str reads a nested JSON value as a string ("" if absent).
func str(m any, path ...string) string {
	for _, p := range path {
		mm, ok := m.(map[string]any)
		if !ok {
			return ""
		}
		m = mm[p]
	}
	switch v := m.(type) {
	case nil:
		return ""
	case string:
		return v
	case float64:
		return fmt.Sprint(int64(v))
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// list reads a nested JSON array ([]any of maps or values).
func list(m any, path ...string) []any {
	for _, p := range path {
		mm, ok := m.(map[string]any)
		if !ok {
			return nil
		}
		m = mm[p]
	}
	l, _ := m.([]any)
	return l
}
